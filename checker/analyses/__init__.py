"""Whole-state-graph analyses over a graph the compiled kernels recorded (``analyses.state_graph``):
availability (can the system always serve again?) and liveness under weak fairness. They return
plain reports and paths of labels; ``traces`` turns paths into trace files."""
