"""Cluster-execution tests: a real one-node Slurm (slurm.py) and the profiles/slurm runs on it."""
