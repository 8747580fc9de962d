"""Models: requests and answers, the answer cache, and the llama.cpp server behind ``local/...`` models."""
