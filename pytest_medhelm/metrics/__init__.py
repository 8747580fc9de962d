"""Pure scoring functions: each MedHELM metric, on an answer and an instance."""
