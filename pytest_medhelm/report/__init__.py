"""Results, tables and reports of a run: aggregation, the JSON contract, terminal and Markdown tables, HTML."""
