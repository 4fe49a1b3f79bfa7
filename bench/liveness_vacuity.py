"""What liveness's vacuity test costs: ``check_leads_to`` timed per property, with the test
(``vacuity``) and with the states a fair run can start from taken as every state (``skip``, so
that no property is called vacuous), on the Kafka model with the min ISR fixed (2.5 M states):

    .venv/bin/python bench/liveness_vacuity.py skip
    .venv/bin/python bench/liveness_vacuity.py vacuity
"""
import sys, time, json
import numpy as np
skip = sys.argv[1] == "skip"
from kraftcheck.checker.analyses import liveness
if skip:
    liveness._fair_run_states = lambda g, lb, w, s: np.ones(g.size, np.uint8)
calls = []
orig = liveness.check_leads_to
def timed(*a, **k):
    t = time.perf_counter(); r = orig(*a, **k); calls.append(time.perf_counter() - t); return r
liveness.check_leads_to = timed
from kraftcheck.cli.main import cli
try:
    cli(["check", "--brokers", "3", "--min-isr", "2", "--min-isr-changes", "0", "--liveness", "-q", "--continue"])
except SystemExit:
    pass
print(sys.argv[1], "check_leads_to s:", [round(c, 2) for c in calls], file=sys.stderr)
