"""Whole-state-graph analyses: availability (can the system always serve again?) and liveness
under weak and strong fairness, over the state graph the compiled kernels build.

``state_graph``  building the graph to analyse (``GraphBuilder``, ``build_graph``, ``CompiledGraph``);
``graph_kernels`` the compiled graph algorithms, each beside a plain-Python twin;
``predicates``   a spec's predicates on every state of the graph;
``availability`` stuck states and sink components, per variant of the spec;
``liveness``, ``liveness_properties``  leads-to under fairness, with lassos; the spec's properties.

They return plain findings and paths of labels; ``traces.analysis_traces`` turns paths into trace
files and ``kraftcheck.analyses`` runs what a check asks for.
"""
