"""Pure component models (no SimPy): compute, memory, collectives, data pipeline, checkpoints."""
