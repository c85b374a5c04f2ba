"""All configuration, from environment variables prefixed ENVSCALER_ (documented in the manual: docs/configuration.md)."""

from __future__ import annotations

import secrets
import socket
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from envscaler.checkout import DEFAULT_CATALOGUE
from envscaler.sandbox.checkers import CheckBudget
from envscaler.sandbox.config import ClusterAuth, ClusterConfig, SandboxConfig, parse_size, secret_problem
from envscaler.server.jsonlimits import JsonLimits



class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENVSCALER_", extra="ignore")

    catalogue: Path = DEFAULT_CATALOGUE
    redis_url: str | None = Field(None, description="unset: start an embedded redis-server")
    redis_maxmemory: str = Field("1g", description="memory of the embedded Redis (compose's too); "
                                 "when full it refuses writes (503) and never evicts a session")
    redis_timeout: float = Field(3.0, gt=0, description="seconds to wait for Redis to connect or "
                                 "answer a command before a request fails with 503")
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list,
                                                     description="comma-separated admin keys")
    log_level: str = "INFO"
    access_log: bool = Field(False, description="uvicorn's line per HTTP request at INFO (off: "
                             "tool calls are summarised, see log_summary_seconds)")
    log_summary_seconds: float = Field(60.0, gt=0, description="seconds between a gateway "
                                       "process's summary lines of its tool calls (each call's "
                                       "own line is DEBUG)")
    workers: int | None = Field(None, ge=1, description="gateway worker processes of `envscaler "
                                "serve`; unset: one per CPU this process may run on")
    worker_restart_delay: float = Field(1.0, gt=0, description="seconds before a gateway "
                                        "worker that died is restarted, doubled for each "
                                        "failure in a row")
    worker_restart_max_delay: float = Field(30.0, gt=0, description="the longest restart delay; "
                                            "a worker that ran this long resets its count")
    worker_restart_limit: int = Field(5, ge=1, description="failures in a row of a worker after "
                                      "which `envscaler serve` gives up and exits 1")
    state_dir: Path = Field(Path.home() / ".local" / "state" / "envscaler",
                            description="where the embedded Redis keeps its append-only file")

    sandbox_backend: Literal["docker", "process", "remote"] = Field(
        "docker", description="remote: sandboxes on sandbox hosts (`envscaler sandbox host`), "
        "found in the registry in ENVSCALER_REDIS_URL")
    cluster_secret: str | None = Field(None, description="the secret shared by gateways and "
                                       "sandbox hosts, each proving it holds it on connect: at "
                                       "least 32 random bytes in hex or base64 (`openssl rand "
                                       "-hex 32`)")
    host_tls_cert: Path | None = Field(None, description="a sandbox host's TLS certificate "
                                       "(with host_tls_key): connections to it are encrypted")
    host_tls_key: Path | None = None
    host_tls_ca: Path | None = Field(None, description="the CA file gateways check hosts' "
                                     "certificates with (set: gateways speak TLS to hosts)")
    host_heartbeat: float = Field(1.0, gt=0, description="seconds between a sandbox host's "
                                  "heartbeats; three missed: taken for dead")
    sandbox_image: str | None = Field(None, description="unset: build the image of this checkout")
    sandbox_base_image: str = "envscaler-base:bookworm"
    sandbox_runtime: str | None = Field(None, description='Docker runtime, e.g. "runsc" for gVisor')
    sandbox_memory: str = "256m"
    sandbox_cpus: float = Field(1.0, gt=0)
    sandbox_pids: int = Field(64, ge=8)
    sandbox_slots: int = Field(32, ge=1, le=256, description="sessions one sandbox container "
                               "serves at once (Docker backend), each as a user of its own under "
                               "its own process limit; the container's memory, processes and "
                               "/tmp are the sum of theirs. 1: a container per session. A "
                               "container's start costs the engine and the kernel far more than "
                               "a slot's: a burst of 512 opens took 5.3-5.9 s in containers of "
                               "16, 3.5-4.2 s in containers of 32")
    sandbox_tmpfs: str = "16m"
    sandbox_log_size: str = Field("1m", description="a sandbox's output kept on the host (its "
                                  "newest part, for diagnostics); the rest is dropped")
    socket_root: Path = Path("/tmp/envscaler")
    docker_timeout: float = Field(15.0, gt=0, description="seconds the Docker engine may take to "
                                  "answer a request (and a call to get an engine thread) before "
                                  "it counts as away: 503")
    docker_threads: int = Field(16, ge=1, description="threads of the Docker backend for engine "
                                "calls, apart from every other thread")
    pool_size: int = Field(8, ge=0)
    max_sandboxes: int = Field(1024, ge=1)
    sandbox_create_concurrency: int = Field(8, ge=1, le=256, description="sandboxes a gateway "
                                            "process creates at once; a burst of opens beyond "
                                            "waits its turn (up to the start timeout), never a "
                                            "fixed rate")

    call_timeout: float = Field(5.0, gt=0)
    load_timeout: float = Field(10.0, gt=0, description="seconds to load or reset an environment "
                                "in a sandbox")
    session_lock_wait: float = Field(15.0, gt=0, description="longest wait for a busy session "
                                     "(then 503)")
    call_order_wait: float = Field(5.0, gt=0, description="how long a call with a seq waits, "
                                   "while its session is idle, for the calls numbered before it "
                                   "(then it runs without them)")
    check_cpu_seconds: float = Field(2.0, gt=0, le=600, description="CPU seconds each check "
                                     "function may spend (CPU time, so verdicts do not depend "
                                     "on load)")
    check_memory: str = Field("128m", description="memory each check may allocate")
    checkers: int = Field(2, ge=1, le=64, description="checker sandboxes per gateway process, "
                          "each judging one validation at a time")
    checker_queue: int = Field(1024, ge=0, description="validations that may wait for a checker "
                               "(beyond: 503 CapacityExhausted); as many as a worker's requests "
                               "in progress, so that a trainer's whole batch may validate at once")
    checker_wait: float = Field(30.0, gt=0, description="longest wait for a checker (then 503)")
    max_state_bytes: int = Field(16 * 1_048_576, ge=1024, description="largest state a sandbox "
                                 "may answer (reads and validation)")
    max_result_bytes: int = Field(1_048_576, ge=1024)
    max_request_bytes: int = Field(4_194_304, ge=1024,
                                   description="largest request body (beyond: 413 RequestTooLarge)")
    max_argument_bytes: int = Field(262_144, ge=1024, description="largest arguments of a tool "
                                    "call, as JSON (beyond: 413 ArgumentsTooLarge)")
    max_json_depth: int = Field(32, ge=2, le=512, description="deepest nesting of arrays and "
                                "objects in a JSON body or in arguments (beyond: 422 "
                                "JsonTooComplex)")
    max_json_items: int = Field(10_000, ge=1, description="most items of one JSON array")
    max_json_keys: int = Field(1_000, ge=1, description="most keys of one JSON object")
    max_json_string: int = Field(262_144, ge=64, description="longest JSON string (characters)")
    max_session_calls: int = Field(10_000, ge=1, description="trajectory entries of one "
                                   "episode (epoch) of a session (beyond: 413 QuotaExceeded)")
    max_trajectory_bytes: int = Field(33_554_432, ge=65_536, description="JSON bytes of the "
                                      "trajectory a session keeps (the episode that ended last "
                                      "and the current one; beyond: 413 QuotaExceeded)")
    max_session_result_bytes: int = Field(16_777_216, ge=65_536, description="JSON bytes of all "
                                          "results of one episode (beyond: 413 QuotaExceeded)")
    header_timeout: float = Field(10.0, gt=0, description="seconds a connection may take to send "
                                  "a request's head (beyond: closed)")
    body_timeout: float = Field(30.0, gt=0, description="seconds a request's body may take to "
                                "arrive after its head (beyond: 408, closed)")
    max_connections: int = Field(1024, ge=1, description="connections and requests in progress "
                                 "per gateway process (beyond: 503)")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "[::1]"],
        description="without API keys, the Host names (any port) and Origins served "
        "(else 421 MisdirectedRequest)")
    session_ttl: float = Field(900.0, gt=0, description="idle seconds before a session's sandbox "
                               "is killed")
    record_ttl: float = Field(86_400.0, gt=0, description="seconds a session's record outlives "
                              "its sandbox")
    snapshot_ttl: float = Field(86_400.0, gt=0, description="seconds a session snapshot is "
                                "kept after it was taken or last opened")
    web_ui: bool = Field(True, description="serve the web page at /ui/ (false: the API alone)")

    @field_validator("redis_url", "sandbox_image", "sandbox_runtime", "workers", "cluster_secret",
                     "host_tls_cert", "host_tls_key", "host_tls_ca", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("cluster_secret")
    @classmethod
    def _a_strong_secret(cls, value: str | None) -> str | None:
        problem = None if value is None else secret_problem(value)
        if problem is not None:
            raise ValueError(f"ENVSCALER_CLUSTER_SECRET {problem}")
        return value

    @field_validator("check_memory", "sandbox_log_size", "redis_maxmemory")
    @classmethod
    def _a_size(cls, value: str) -> str:
        parse_size(value)  # ValueError: "not a size"
        return value

    @field_validator("api_keys", "allowed_hosts", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @cached_property
    def instance(self) -> str:
        """This process's identity on shared Redis and Docker: host name plus a random suffix."""
        return f"{socket.gethostname()[:20]}-{secrets.token_hex(4)}".lower()

    def json_limits(self) -> JsonLimits:
        return JsonLimits(self.max_json_depth, self.max_json_items, self.max_json_keys,
                          self.max_json_string)

    def check_budget(self) -> CheckBudget:
        return CheckBudget(self.check_cpu_seconds, parse_size(self.check_memory))

    def cluster_auth(self) -> ClusterAuth:
        """Raises ``ValueError`` without a cluster secret: hosts serve no one without it."""
        if not self.cluster_secret:
            raise ValueError("ENVSCALER_CLUSTER_SECRET is not set: sandbox hosts and the "
                             "gateways that use them share it")
        return ClusterAuth(self.cluster_secret.encode(), self.host_tls_cert, self.host_tls_key,
                           self.host_tls_ca)

    def cluster_config(self) -> ClusterConfig | None:
        """The remote backend's hosts; None for a local backend."""
        if self.sandbox_backend != "remote":
            return None
        if not self.redis_url:
            raise ValueError("the remote sandbox backend finds its hosts in ENVSCALER_REDIS_URL")
        return ClusterConfig(self.redis_url, self.cluster_auth())

    def sandbox_config(self, image: str, labels: dict[str, str] | None = None) -> SandboxConfig:
        """The sandbox layer's settings: every `SandboxConfig` field of the same name as a setting
        here, with ``image`` resolved (built when ``sandbox_image`` is unset) and ``labels`` (put
        on every sandbox, e.g. a test run's id). With the remote backend the gateway keeps no
        warm pool: the hosts do."""
        remote = self.sandbox_backend == "remote"
        return SandboxConfig(
            sandbox_backend=self.sandbox_backend, sandbox_image=image,
            sandbox_runtime=self.sandbox_runtime, sandbox_memory=self.sandbox_memory,
            sandbox_cpus=self.sandbox_cpus, sandbox_pids=self.sandbox_pids,
            sandbox_slots=self.sandbox_slots, sandbox_tmpfs=self.sandbox_tmpfs, sandbox_log_size=self.sandbox_log_size,
            socket_root=self.socket_root, pool_size=0 if remote else self.pool_size,
            max_sandboxes=self.max_sandboxes,
            sandbox_create_concurrency=self.sandbox_create_concurrency,
            docker_timeout=self.docker_timeout, docker_threads=self.docker_threads,
            labels=labels or {}, cluster=self.cluster_config())


class GivenSettings(Settings):
    """Settings from the values given alone, never from this process's environment: what a
    process handed its settings explicitly (a Ray host actor) is configured by them only."""

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   **sources: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)
