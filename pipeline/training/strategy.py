"""Choosing the tf.distribute strategy, in a fixed order, and saying which one was chosen.

  1. A TPU (`--tpu NAME`, `--tpu local`, or TPU_NAME): TPUStrategy. Unreachable = HardwareUnavailable
     (exit 2) naming what was tried; never a silent fall back to the CPU.
  2. TF_CONFIG in the environment: MultiWorkerMirroredStrategy (one process per machine).
  3. More than one GPU (or `cpu_replicas` > 1, which splits the CPU into logical devices so the
     mirrored code path can be tested on one machine): MirroredStrategy.
  4. Otherwise the default strategy (one CPU or GPU).
"""
from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import urlparse

import tensorflow as tf

from pipeline.errors import ConfigError, HardwareUnavailable, PeerLost

# How long to wait for a TPU worker's gRPC port before calling it unreachable: TensorFlow itself
# waits forever on a closed port.
TPU_CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class StrategyChoice:
    """The tf.distribute strategy this process trains (or predicts) under, with what the rest of training needs to
    know of it: how many replicas a global batch splits across, whether this process writes the run (the chief),
    and the line that tells the user and the manifest which one was chosen and why."""

    strategy: tf.distribute.Strategy
    kind: str  # tpu | multi_worker_mirrored | mirrored | default
    replicas: int  # replicas in sync across all workers
    description: str  # one line for the user and the manifest
    is_chief: bool  # only the chief writes the run directory
    is_tpu: bool


def choose(tpu: Optional[str] = None, cpu_replicas: int = 1) -> StrategyChoice:
    """Pick the strategy for this process (see the module docstring for the order)."""
    tpu = tpu or os.environ.get("TPU_NAME")
    if tpu:
        return _tpu(tpu)
    if os.environ.get("TF_CONFIG"):
        return _multi_worker()
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) > 1:
        strategy = tf.distribute.MirroredStrategy()
        return StrategyChoice(strategy, "mirrored", strategy.num_replicas_in_sync,
                      f"MirroredStrategy over {len(gpus)} GPUs", True, False)
    if cpu_replicas > 1:
        return _mirrored_cpu(cpu_replicas)
    strategy = tf.distribute.get_strategy()
    device = "1 GPU" if gpus else "the CPU"
    return StrategyChoice(strategy, "default", 1, f"default strategy on {device}", True, False)


def _tpu(name: str) -> StrategyChoice:
    tried = f"TPU {name!r}" + (" (from TPU_NAME)" if name == os.environ.get("TPU_NAME") else "")
    if name.startswith("grpc://"):
        _check_reachable(name, tried)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="" if name == "local" else name)
        if name != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    except Exception as err:  # the resolver raises URLError, ValueError, NotFoundError, ... by environment
        raise HardwareUnavailable(
            f"cannot reach {tried}: {type(err).__name__}: {str(err).splitlines()[0][:200]}. "
            "Expected a Cloud TPU VM (--tpu local), a TPU name resolvable from this GCE VM, or grpc://HOST:8470. "
            "Not falling back to the CPU: drop --tpu and unset TPU_NAME to train without a TPU."
        ) from err
    replicas = strategy.num_replicas_in_sync
    return StrategyChoice(strategy, "tpu", replicas, f"TPUStrategy on {name} with {replicas} cores", True, True)


def _check_reachable(address: str, tried: str) -> None:
    url = urlparse(address)
    try:
        with socket.create_connection((url.hostname, url.port or 8470), timeout=TPU_CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        raise HardwareUnavailable(
            f"cannot reach {tried}: {err}. Expected a TPU worker listening at {url.hostname}:{url.port or 8470}. "
            "Not falling back to the CPU: drop --tpu and unset TPU_NAME to train without a TPU."
        ) from err


def _multi_worker() -> StrategyChoice:
    try:
        config = json.loads(os.environ["TF_CONFIG"])
        task = config["task"]
        workers = config["cluster"]["worker"]
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            f"TF_CONFIG is not valid ({err!r}); expected JSON like "
            '{"cluster": {"worker": ["host1:port", "host2:port"]}, "task": {"type": "worker", "index": 0}}'
        ) from err
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    is_chief = task.get("type") == "chief" or (task.get("type") == "worker" and task.get("index") == 0 and "chief" not in config["cluster"])
    return StrategyChoice(
        strategy, "multi_worker_mirrored", strategy.num_replicas_in_sync,
        f"MultiWorkerMirroredStrategy, {len(workers)} workers, this is {task.get('type')} {task.get('index')}",
        is_chief, False,
    )


def _mirrored_cpu(replicas: int) -> StrategyChoice:
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError as err:
        raise ConfigError(f"cannot split the CPU into {replicas} devices after TensorFlow started: {err}") from err
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    strategy = tf.distribute.MirroredStrategy(devices)
    return StrategyChoice(strategy, "mirrored", replicas, f"MirroredStrategy over {replicas} logical CPU devices", True, False)


# How a MultiWorkerMirroredStrategy collective fails when a peer dies or becomes unreachable: the gRPC
# connection is reset (Unavailable), the health check times out (DeadlineExceeded), or the
# collective is aborted or cancelled because of one of those.
PEER_FAILURES = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
                 tf.errors.CancelledError)


@contextmanager
def peer_failures_explained(chosen: StrategyChoice, run_dir: Path) -> Iterator[None]:
    """Under MultiWorkerMirroredStrategy, turn a lost peer's gRPC failure into PeerLost saying how to resume."""
    try:
        yield
    except PEER_FAILURES as err:
        if chosen.kind != "multi_worker_mirrored":
            raise
        detail = " ".join(str(getattr(err, "message", err)).split())[:240]
        raise PeerLost(
            f"{chosen.description}: lost contact with another worker ({type(err).__name__}: {detail}). "
            f"A worker stopped or became unreachable, and MultiWorkerMirroredStrategy cannot continue without it. "
            f"To resume, restart every worker with the same command and the same --out {run_dir} "
            f"(storage all workers see: a shared disk or gs://); they continue from the last completed epoch "
            f"saved in {Path(run_dir) / '.train_state'}, or from the start if none completed"
        ) from err
