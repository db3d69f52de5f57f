"""The `slurm_cluster` fixture: one real Slurm cluster for the whole session (see slurm.py)."""

import contextlib

import pytest
from system_packages import unavailable

from . import slurm


@pytest.fixture(scope="session")
def say(request):
    """Print a line to the terminal even under pytest's output capture (timings for the notes)."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def _say(msg: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"\n[slurm] {msg}", flush=True)

    return _say


@pytest.fixture(scope="session")
def slurm_cluster(say):
    reason = slurm.unavailable_reason()
    if reason:
        unavailable(f"no local Slurm cluster: {reason}")
    with slurm.slurm_cluster() as cluster:
        say(
            f"bring-up {cluster.timings['bring_up']:.1f} s "
            f"({', '.join(f'{k} {v:.1f}' for k, v in cluster.timings.items() if k != 'bring_up')}), "
            f"state {cluster.state_dir}"
        )
        yield cluster
    say(f"teardown {cluster.timings['teardown']:.1f} s")
