"""The agent's benchmarks: a scoring cycle against the raw exchange, steady memory, hostile peers and
the OTLP receiver under load.

``cycle`` and ``hostile`` register benchmarks; ``otlp`` is a script of its own (``python -m
bench.agent.otlp``).  The measured agent runs in ``child``, a process of its own so its memory is its
own; ``servers`` are the minimal peers it talks to.
"""
