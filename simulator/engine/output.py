"""What :func:`simulator.engine.loop.simulate` returns (a module of its own: the loop is
compiled with the core, and this record is pickled between processes as plain Python)."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simulator.metrics.records import RunRecorder

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # annotations only (start-up: pandas loads after the simulation)


@dataclass
class SimOutput:
    """Raw output of :func:`simulate`."""

    recorder: RunRecorder
    replicas: list
    end_time_s: float
    sim_wall_s: float
    #: per degrade policy: :meth:`simulator.scheduling.degrade.DegradeController.summary`
    degrade: list = field(default_factory=list)
    #: replicas behind the scenario's router (the rest form the degrade fallback set)
    num_primary_replicas: int = 0
    #: an autoscaled pool's replicas over time (:class:`simulator.metrics.fleet.ReplicaSpan`
    #: per replica; None: a fixed fleet, held throughout)
    replica_spans: list | None = None
    #: an autoscaled pool's decisions and cold start
    #: (:meth:`simulator.engine.autoscaling.Fleet.outputs`; None without autoscaling)
    autoscale: dict | None = None

    def requests(self) -> pd.DataFrame:
        return self.recorder.requests_frame()

    def steps(self) -> pd.DataFrame:
        return self.recorder.steps_frame()

    def step_table(self):
        """The step table without building a DataFrame
        (:meth:`simulator.metrics.records.RunRecorder.step_table`)."""
        return self.recorder.step_table()

    def __getstate__(self) -> dict:
        # pickled (a result sent between processes): a replica's SimPy environment, wake-up
        # event and decode run in flight hold the simulation's generators, which cannot be
        # pickled and mean nothing once the run is over; copies without them travel
        state = dict(self.__dict__)
        state["replicas"] = [_finished_replica(rep) for rep in self.replicas]
        return state


def _finished_replica(rep):
    """A shallow copy of ``rep`` without its simulation handles (``env``, ``wake``, ``jump``,
    ``on_idle``)."""
    c = copy.copy(rep)
    for name in ("env", "wake", "jump", "on_idle"):
        if hasattr(c, name):
            setattr(c, name, None)
    return c
