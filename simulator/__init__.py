"""servesim: a discrete-event capacity-planning simulator for LLM inference serving.

One folder per layer; a module imports its own layer and those below, never one above
(``tests/test_import_graph.py``). Lowest first:

==========  ================================================================================
layer       what it holds
==========  ================================================================================
base        schema base, requests, seeded streams, resources, progress, budgets, output
            folders, input bounds, the one percentile definition
catalog     model architectures and GPU specifications
workload    trace readers, synthetic generators, post-processing
perf        the step-time model: step shape, kernels (tables, roofline), engine profiles
kv          KV memory: block pool, cache manager, copy-on-write, memory planner
speculative acceptance models and the economics of speculative decoding
topology    maths of moving work between GPUs: P/D transfer, pipeline and expert parallelism
scenario    the scenario schema: config, degrade policies, pools
scheduling  queues, step emission, the continuous, static and speculative schedulers
metrics     per-request records, step tables, summaries, cost
cluster     a replica, its set-up from a scenario, routing
engine      the SimPy loop, fast-forwarded decode runs, DP ranks in lockstep
report      Markdown and HTML reports, figures
runs        one scenario end to end; pools behind a gateway
experiments families of scenarios run together: compare, spec-sweep
observe     recorded real-engine runs: readers, replay, ``validate --recorded``
planner     sweeps and SLO-constrained capacity plans
cli         the ``servesim`` command line
==========  ================================================================================
"""

__version__ = "0.1.0"

# the compiled (mypyc) per-event core when it is current, else its Python source: decided
# before any core module is imported (simulator/base/compiled_core.py)
from simulator.base.compiled_core import install as _install_core

_install_core()
