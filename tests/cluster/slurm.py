"""A real one-node Slurm cluster for tests: slurmctld + slurmd + slurmdbd/MariaDB accounting, one fake GPU.

Debian bookworm ships Slurm 22.05. The recipe and its numbered pitfalls are in
/work/shared/notes/slurm-local-cluster.md; comments below cite them as "pitfall N".

    with slurm_cluster() as cluster:          # installs packages if missing, starts the daemons
        ...  sbatch -p cluster.partition -A cluster.account ...
                                              # on exit: stops exactly the daemons it started

From a shell (leaves the cluster running until `down`):

    python tests/cluster/slurm.py up   [--state /tmp/attnaudit-slurm]
    python tests/cluster/slurm.py down [--state /tmp/attnaudit-slurm]

Everything lives in a state directory under /tmp: configs, MariaDB data, Slurm state, logs, PIDs.
Only /etc/slurm/{slurm,gres,slurmdbd,cgroup}.conf are symlinks into it while the cluster runs:
the slurm-jobstep plugin strips SLURM_CONF from the environment before it calls `srun` inside a
job, so the configuration must be found at its default path.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "mariadb-server"]
BINARIES = [
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "sbatch",
    "sacct",
    "sacctmgr",
    "munged",
    "mariadbd",
    "mariadb-install-db",
]
SLURM_PORTS = {"slurmctld": 6817, "slurmd": 6818, "slurmdbd": 6819}  # Slurm's defaults
ETC_SLURM = Path("/etc/slurm")
CONFIG_FILES = ["slurm.conf", "gres.conf", "slurmdbd.conf", "cgroup.conf"]
CLUSTER_NAME = "attnaudit"
NODE = "localhost"  # pitfall 3: the VM's hostname is arbitrary; slurmd is started with -N localhost
STOP_ORDER = ["slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"]


@dataclasses.dataclass
class Cluster:
    partition: str
    account: str
    state_dir: Path
    cpus: int  # CPUs of the one node (= the machine's)
    gpus: int  # fake GPUs of the one node
    pids: dict[str, int]  # daemons this harness started (munged absent if it was already running)
    timings: dict[str, float]

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["state_dir"] = str(self.state_dir)
        return json.dumps(d, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        d = json.loads(text)
        d["state_dir"] = Path(d["state_dir"])
        return cls(**d)


def log(msg: str) -> None:
    print(f"[slurm-harness {time.strftime('%T')}] {msg}", file=sys.stderr, flush=True)


class CommandFailed(subprocess.SubprocessError):
    pass


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run, capture, and on failure raise with the command's own error message."""
    p = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if p.returncode != 0:
        raise CommandFailed(f"`{' '.join(cmd)}` exited {p.returncode}: {(p.stderr or p.stdout).strip()}")
    return p


def wait_for(desc: str, seconds: float, ok) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except (subprocess.SubprocessError, OSError):
            pass
        time.sleep(0.25)
    raise TimeoutError(f"timed out after {seconds:.0f} s waiting for {desc}")


def succeeds(*cmd: str) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


def pid_alive(pid: int) -> bool:
    """True while pid runs; reaps it first if it is our own exited child (mariadbd)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def read_pid(path: Path) -> int:
    wait_for(f"pid file {path}", 30, lambda: path.is_file() and path.read_text().strip())
    return int(path.read_text().split()[0])


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- availability and packages ------------------------------------------------------------------


def unavailable_reason() -> str | None:
    """Why this machine cannot host the cluster (a pytest skip reason), or None."""
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (starts munged, MariaDB and the Slurm daemons, writes /etc/slurm)"
    if missing_binaries() and shutil.which("apt-get") is None:
        return f"Slurm/MariaDB/munge not installed and apt-get unavailable (missing: {missing_binaries()})"
    return None


def missing_binaries() -> list[str]:
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin"
    return [b for b in BINARIES if shutil.which(b, path=path) is None]


def install_packages(state: Path) -> None:
    if not missing_binaries():
        return
    log(f"installing {' '.join(PACKAGES)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    lists = [p for p in Path("/var/lib/apt/lists").glob("*") if p.name not in ("lock", "partial", "auxfiles")]
    if not lists:
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    with open(state / "log" / "apt.log", "w") as out:
        # Postinsts try to start the services and policy-rc.d refuses (pitfall 2): expected.
        if subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            # stale package lists (404 on a superseded .deb): refresh once and retry
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=out, stderr=subprocess.STDOUT)
            subprocess.run(cmd, check=True, env=env, stdout=out, stderr=subprocess.STDOUT)
    if missing_binaries():
        raise RuntimeError(f"still missing after apt-get install: {missing_binaries()}")


# ---- configuration ------------------------------------------------------------------------------


def write_configs(state: Path, partition: str, db_port: int, db_pass: str) -> None:
    etc = state / "etc"
    cpus = os.cpu_count() or 1
    mem_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 - 1024
    (etc / "slurm.conf").write_text(f"""\
# one-node test cluster written by tests/cluster/slurm.py
ClusterName={CLUSTER_NAME}
SlurmctldHost={NODE}
SlurmUser=slurm
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
MailProg=/bin/true
# pitfall 4: no cgroups (none usable here); consequence: mem_mb is not enforced
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=600
StateSaveLocation={state}/slurmctld
SlurmdSpoolDir={state}/slurmd
# pid files in the state dir, not /run: none is left behind to trip a later purge (pitfall 9)
SlurmctldPidFile={state}/run/slurmctld.pid
SlurmdPidFile={state}/run/slurmd.pid
SlurmctldLogFile={state}/log/slurmctld.log
SlurmdLogFile={state}/log/slurmd.log
# pitfall 1: without accounting storage the plugin's sacct polling hangs forever
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
# store sbatch --comment (the plugin puts rule_<name>_wildcards_... there): sacct -o Comment
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
GresTypes=gpu
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} Gres=gpu:1 State=UNKNOWN
PartitionName={partition} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")
    (etc / "gres.conf").write_text(f"""\
# pitfall 5: one fake GPU. Slurm drops a GPU without File= and drains the node, so point it at /dev/null.
# Jobs asking --gpus=1 run with CUDA_VISIBLE_DEVICES=0; torch.cuda.is_available() stays False.
AutoDetect=off
NodeName={NODE} Name=gpu File=/dev/null
""")
    (etc / "cgroup.conf").write_text("""\
# Intentionally empty: slurm.conf uses proctrack/linuxproc and task/none, so no cgroup plugin
# reads this (pitfall 4). It exists so a cgroup.conf left in /etc/slurm cannot change that.
""")
    dbd = etc / "slurmdbd.conf"
    dbd.write_text(f"""\
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile={state}/log/slurmdbd.log
PidFile={state}/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=slurm
StoragePass={db_pass}
StorageLoc=slurm_acct_db
""")
    shutil.chown(dbd, "slurm", "slurm")  # slurmdbd refuses a slurmdbd.conf not 0600 and owned by SlurmUser
    dbd.chmod(0o600)


def link_configs(state: Path) -> None:
    """Point /etc/slurm/*.conf at the state dir; refuse to touch a configuration that is not ours."""
    ETC_SLURM.mkdir(exist_ok=True)
    for name in CONFIG_FILES:
        link = ETC_SLURM / name
        if link.is_symlink() and not link.exists():
            link.unlink()  # dangling link from an earlier, killed harness
        elif link.exists() or link.is_symlink():
            raise RuntimeError(f"{link} exists; not replacing a Slurm configuration this harness did not write")
        link.symlink_to(state / "etc" / name)


def unlink_configs(state: Path) -> None:
    for name in CONFIG_FILES:
        link = ETC_SLURM / name
        if link.is_symlink() and os.readlink(link) == str(state / "etc" / name):
            link.unlink()


# ---- daemons ------------------------------------------------------------------------------------


def start_munged(state: Path, pids: dict[str, int]) -> None:
    pidfile = Path("/run/munge/munged.pid")
    if (
        pidfile.is_file()
        and pid_alive(int(pidfile.read_text().split()[0]))
        and succeeds("sh", "-c", "munge -n | unmunge")
    ):
        log("munged already running: using it, will not stop it")
        return
    key = Path("/etc/munge/munge.key")
    if not key.is_file() or key.stat().st_size == 0:  # Debian's postinst normally creates it
        run(["mungekey", "--create", f"--keyfile={key}"])
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    Path("/run/munge").mkdir(mode=0o755, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"])  # daemonizes itself
    wait_for("munged", 15, lambda: succeeds("sh", "-c", "munge -n | unmunge"))
    pids["munged"] = read_pid(pidfile)


def start_mariadb(state: Path, pids: dict[str, int], db_port: int, db_pass: str) -> None:
    """A private MariaDB: data dir, socket and pid in the state dir, TCP on a free localhost port."""
    datadir, rundir = state / "mysql", state / "mysql-run"  # mariadbd runs as mysql: both owned by it
    sock = rundir / "mysqld.sock"
    for d in (datadir, rundir):
        d.mkdir(exist_ok=True)
        shutil.chown(d, "mysql", "mysql")
    # --no-defaults: ignore /etc/mysql/my.cnf (its socket and datadir are the system server's)
    run(
        [
            "mariadb-install-db",
            "--no-defaults",
            "--user=mysql",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]
    )
    out = open(state / "log" / "mariadbd.log", "w")  # noqa: SIM115 (the daemon keeps it open)
    proc = subprocess.Popen(
        [
            "mariadbd",
            "--no-defaults",
            "--user=mysql",
            f"--datadir={datadir}",
            f"--socket={sock}",
            f"--pid-file={rundir}/mariadbd.pid",
            "--bind-address=127.0.0.1",
            f"--port={db_port}",
            "--skip-name-resolve",
            # values slurmdbd asks for; silences "Database settings not recommended" (pitfall 10)
            "--innodb-buffer-pool-size=128M",
            "--innodb-lock-wait-timeout=900",
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids["mariadbd"] = proc.pid

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"mariadbd exited ({proc.returncode}); see {state}/log/mariadbd.log")
        return succeeds("mariadb-admin", "--no-defaults", f"--socket={sock}", "ping")

    wait_for("mariadbd", 60, ready)
    run(
        [
            "mariadb",
            "--no-defaults",
            f"--socket={sock}",
            "-e",
            f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{db_pass}';"
            " GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;",
        ]
    )


def start_slurm(state: Path, pids: dict[str, int], timings: dict[str, float]) -> None:
    t = time.monotonic()
    run(["/usr/sbin/slurmdbd"])  # each daemon forks into the background
    pids["slurmdbd"] = read_pid(state / "run" / "slurmdbd.pid")
    wait_for("slurmdbd", 60, lambda: succeeds("sacctmgr", "-n", "list", "cluster"))
    # register the cluster before slurmctld starts, so its first connection to slurmdbd is accepted
    run(["sacctmgr", "-i", "add", "cluster", CLUSTER_NAME])
    timings["slurmdbd"] = time.monotonic() - t

    t = time.monotonic()
    run(["/usr/sbin/slurmctld"])
    pids["slurmctld"] = read_pid(state / "run" / "slurmctld.pid")
    wait_for("slurmctld", 60, lambda: succeeds("scontrol", "ping"))
    timings["slurmctld"] = time.monotonic() - t

    t = time.monotonic()
    run(["/usr/sbin/slurmd", "-N", NODE])
    pids["slurmd"] = read_pid(state / "run" / "slurmd.pid")

    def node_up() -> bool:
        st = run(["sinfo", "-h", "-n", NODE, "-o", "%T"]).stdout.strip()
        return st in ("idle", "mixed", "allocated")

    try:
        wait_for(f"node {NODE} idle", 60, node_up)
    except TimeoutError:
        # a DRAIN reason (e.g. "gres/gpu count reported lower than configured", pitfall 5) survives
        # in slurmctld's state; resume once, then give up with the reason
        subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], capture_output=True)
        try:
            wait_for(f"node {NODE} idle", 30, node_up)
        except TimeoutError as e:
            reason = subprocess.run(["sinfo", "-R"], capture_output=True, text=True).stdout
            raise RuntimeError(f"{e}\n{reason}\nsee {state}/log/slurmd.log, slurmctld.log") from None
    timings["slurmd"] = time.monotonic() - t


def add_account(account: str) -> None:
    """The plugin validates slurm_account against `sacctmgr -n -s list user <me>` (pitfall 8)."""
    user = getpass.getuser()  # the name the plugin looks up
    run(["sacctmgr", "-i", "add", "account", account, f"Cluster={CLUSTER_NAME}", "Description=tests"])
    run(["sacctmgr", "-i", "add", "user", user, f"Account={account}", f"Cluster={CLUSTER_NAME}"])
    wait_for(
        f"account {account}",
        15,
        lambda: account in run(["sacctmgr", "-n", "-s", "list", "user", user, "format=account%64"]).stdout.split(),
    )


def stop(cluster: Cluster) -> float:
    """Stop the recorded daemons by PID (never by name); return the seconds it took."""
    t = time.monotonic()
    if cluster.pids.get("slurmctld") and pid_alive(cluster.pids["slurmctld"]):
        # jobs still running (a test failed half-way) would leave slurmstepd orphans behind
        subprocess.run(["scancel", f"--partition={cluster.partition}"], capture_output=True)
        with contextlib.suppress(TimeoutError):
            wait_for("cancelled jobs to end", 15, lambda: not run(["squeue", "-h"]).stdout.strip())
    for name in STOP_ORDER:
        pid = cluster.pids.get(name)
        if not pid or not pid_alive(pid):
            continue
        comm = ""
        with contextlib.suppress(FileNotFoundError):
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if comm != name:  # the pid was reused by something else
            log(f"pid {pid} is now {comm!r}, not {name}: not touching it")
            continue
        os.kill(pid, signal.SIGTERM)
        try:
            wait_for(f"{name} ({pid}) to exit", 20, lambda pid=pid: not pid_alive(pid))
        except TimeoutError:
            log(f"{name} ({pid}) ignored SIGTERM for 20 s: SIGKILL")
            os.kill(pid, signal.SIGKILL)
    unlink_configs(cluster.state_dir)
    for d in ("mysql", "mysql-run"):  # the bulk; logs stay for post-mortems
        shutil.rmtree(cluster.state_dir / d, ignore_errors=True)
    (cluster.state_dir / "cluster.json").unlink(missing_ok=True)  # the record of a running cluster
    return time.monotonic() - t


def start(state_dir: Path | None = None, partition: str = "debug", account: str = "attnaudit") -> Cluster:
    """Install (if needed) and start everything; on any failure stop what was started and re-raise."""
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    busy = [f"{d} :{p}" for d, p in SLURM_PORTS.items() if port_in_use(p)]
    if busy:
        raise RuntimeError(f"Slurm ports already in use ({', '.join(busy)}): another cluster is running")
    state = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="attnaudit-slurm-", dir="/tmp"))
    if (state / "mysql").exists() or (state / "cluster.json").exists():
        raise RuntimeError(
            f"{state} holds a cluster that was not stopped: `slurm.py down --state {state}` or remove the directory"
        )
    state.mkdir(parents=True, exist_ok=True)
    # mkdtemp makes it 0700; slurmctld and mariadbd run as slurm and mysql and must traverse it
    state.chmod(0o755)
    for sub in ("etc", "run", "log", "slurmctld", "slurmd"):
        (state / sub).mkdir(exist_ok=True)

    timings: dict[str, float] = {}
    pids: dict[str, int] = {}
    cluster = Cluster(partition, account, state, os.cpu_count() or 1, 1, pids, timings)
    t0 = time.monotonic()
    try:
        install_packages(state)
        timings["install"] = time.monotonic() - t0
        for sub in ("log", "slurmctld"):  # the slurm user exists only after the install
            shutil.chown(state / sub, "slurm", "slurm")
        db_port, db_pass = free_port(), os.urandom(8).hex()
        write_configs(state, partition, db_port, db_pass)
        link_configs(state)

        t = time.monotonic()
        start_munged(state, pids)
        timings["munged"] = time.monotonic() - t
        t = time.monotonic()
        start_mariadb(state, pids, db_port, db_pass)
        timings["mariadb"] = time.monotonic() - t
        start_slurm(state, pids, timings)
        t = time.monotonic()
        add_account(account)
        timings["account"] = time.monotonic() - t
    except BaseException:
        log(f"bring-up failed; stopping what was started (logs in {state}/log)")
        stop(cluster)
        raise
    timings["bring_up"] = time.monotonic() - t0
    (state / "cluster.json").write_text(cluster.to_json())
    log(
        f"cluster up in {timings['bring_up']:.1f} s "
        f"({', '.join(f'{k} {v:.1f}' for k, v in timings.items() if k != 'bring_up')}); "
        f"partition={partition} account={account} state={state} pids={pids}"
    )
    return cluster


@contextlib.contextmanager
def slurm_cluster(state_dir: Path | None = None, partition: str = "debug", account: str = "attnaudit"):
    """Bring up the cluster, yield its Cluster record, stop it on exit (even after errors)."""
    cluster = start(state_dir, partition, account)
    try:
        yield cluster
    finally:
        cluster.timings["teardown"] = stop(cluster)
        (cluster.state_dir / "timings.json").write_text(json.dumps(cluster.timings, indent=2))
        log(f"cluster down in {cluster.timings['teardown']:.1f} s (logs kept in {cluster.state_dir}/log)")


# ---- sacct --------------------------------------------------------------------------------------

SACCT_FIELDS = [
    "JobID",
    "JobName",
    "State",
    "Elapsed",
    "Partition",
    "Account",
    "Timelimit",
    "ReqTRES",
    "AllocTRES",
    "Comment",
    "WorkDir",
]


def sacct_jobs(after_jobid: int = 0) -> list[dict[str, str]]:
    """Allocation-level sacct rows (-X) of all users with a numeric JobID > after_jobid."""
    out = run(["sacct", "-a", "-X", "-P", "-n", "--starttime", "2000-01-01", "-o", ",".join(SACCT_FIELDS)]).stdout
    rows = [dict(zip(SACCT_FIELDS, line.split("|"))) for line in out.splitlines() if line.strip()]
    return [r for r in rows if r["JobID"].isdigit() and int(r["JobID"]) > after_jobid]


def last_jobid() -> int:
    return max((int(r["JobID"]) for r in sacct_jobs()), default=0)


# ---- shell entry --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--state", type=Path, default=Path("/tmp/attnaudit-slurm"))
    p.add_argument("--partition", default="debug")
    p.add_argument("--account", default="attnaudit")
    a = p.parse_args(argv)
    if a.action == "up":
        start(a.state, a.partition, a.account)
        print(f"export PARTITION={a.partition} ACCOUNT={a.account}   # stop with: {sys.argv[0]} down --state {a.state}")
    else:
        record = a.state / "cluster.json"
        if not record.is_file():
            print(f"no {record}: nothing to stop", file=sys.stderr)
            return 1
        print(f"stopped in {stop(Cluster.from_json(record.read_text())):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
