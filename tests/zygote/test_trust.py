"""Nobody else can pose as the zygote server (lib/ansible_zygote/socket_dir.py, the client's
``SO_PEERCRED`` check): a socket bound by another user (a user the test makes) is never sent a
request, a server never takes over another user's directory, and the clean-up that hack/run.sh
runs ignores what it may not remove."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import zygote_harness as harness
from ansible_zygote import socket_dir

OTHER_USER = "ato-zygote-test"
# The other user's interpreter: the project's venv links to one only root may read here.
SYSTEM_PYTHON = "/usr/bin/python3"
# Binds a seqpacket socket as the other user, then records how many bytes each connection sends.
IMPOSTOR = """
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sock.bind(sys.argv[1])
sock.listen(8)
print("listening", flush=True)
while True:
    conn, _ = sock.accept()
    conn.settimeout(5)
    try:
        data = conn.recv(1 << 20)
    except OSError:
        data = b""
    print(f"received {len(data)}", flush=True)
    conn.close()
"""


@pytest.fixture(scope="session")
def other_user() -> pwd.struct_passwd:
    """A system user of the test's own (kept: other test sessions on this machine may use it)."""
    try:
        return pwd.getpwnam(OTHER_USER)
    except KeyError:
        pass
    done = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
        capture_output=True,
        text=True,
        check=False,
    )
    # 9: made meanwhile by another session.
    assert done.returncode in (0, 9), done.stderr
    return pwd.getpwnam(OTHER_USER)


def as_user(user: pwd.struct_passwd) -> dict:
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@pytest.fixture
def shared_tmp():
    """A world-writable sticky directory, as /tmp is (in /tmp: the other user must reach it)."""
    path = Path(tempfile.mkdtemp(prefix="zyg-shared-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_socket_of_another_user_gets_no_request(other_user, shared_tmp: Path):
    """Another user bound the path first: the client falls back to the real program without
    sending its request (its environment, its stdio) to that listener."""
    path = str(shared_tmp / "ato-zygote.sock")
    impostor = subprocess.Popen(
        [SYSTEM_PYTHON, "-I", "-c", IMPOSTOR, path],
        stdout=subprocess.PIPE,
        text=True,
        **as_user(other_user),  # type: ignore[arg-type]
    )
    try:
        assert impostor.stdout is not None and impostor.stdout.readline() == "listening\n"
        env = {
            **os.environ,
            "ANSIBLE_ZYGOTE_SOCKET": path,
            "PATH": f"{harness.CLIENT_BIN}:{harness.VENV_BIN}",
        }
        done = subprocess.run(["ansible-playbook", "--version"], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("ansible-playbook [core "), "the real program ran"
        # The client connected (to learn who listens) and sent nothing.
        assert impostor.stdout.readline() == "received 0\n"
    finally:
        impostor.kill()
        impostor.wait()


def test_the_server_refuses_another_users_directory(other_user, work: Path):
    """A directory the server does not own (another user made it and bound the socket there
    first): the server neither removes that socket nor binds, and says why."""
    directory = work / f"theirs-{time.monotonic_ns()}"
    directory.mkdir(mode=0o700)
    os.chown(directory, other_user.pw_uid, other_user.pw_gid)
    theirs = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.bind(str(directory / "server.sock"))
    os.chown(directory / "server.sock", other_user.pw_uid, other_user.pw_gid)
    before = os.lstat(directory / "server.sock").st_ino
    env = {**os.environ, "PYTHONPATH": str(harness.ROOT / "lib")}
    argv = [sys.executable, "-m", "ansible_zygote.server", "--socket", str(directory / "server.sock")]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the server served from another user's directory")
    finally:
        theirs.close()
    assert done.returncode != 0
    assert f"belongs to uid {other_user.pw_uid}" in done.stderr
    assert os.lstat(directory / "server.sock").st_ino == before


@pytest.mark.parametrize("mode", [0o755, 0o777, 0o1777])
def test_the_server_refuses_a_directory_open_to_others(work: Path, mode: int):
    directory = work / f"open-{mode:o}-{time.monotonic_ns()}"
    directory.mkdir()
    directory.chmod(mode)
    with pytest.raises(socket_dir.NotPrivate, match="0700 wanted"):
        socket_dir.ensure_private(str(directory))


def test_the_server_makes_its_directory_private(work: Path):
    directory = work / f"new-{time.monotonic_ns()}"
    socket_dir.ensure_private(str(directory))
    st = os.lstat(directory)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    link = work / f"link-{time.monotonic_ns()}"
    link.symlink_to(directory)
    with pytest.raises(socket_dir.NotPrivate, match="not a directory"):
        socket_dir.ensure_private(str(link))


def dead_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(str(path))
    sock.close()


def test_the_clean_up_ignores_what_it_may_not_remove(other_user, shared_tmp: Path):
    """hack/run.sh's first step, as another user than the one whose operator was killed: that
    user's dead sockets stay (they are not ours), and a new private socket path is made."""
    dead_socket(shared_tmp / "ato-zygote.old.sock")
    (shared_tmp / "ato-zygote.dead").mkdir(mode=0o700)
    dead_socket(shared_tmp / "ato-zygote.dead" / "server.sock")
    env = {**os.environ, "PYTHONPATH": str(harness.ROOT / "lib")}
    done = subprocess.run(
        [SYSTEM_PYTHON, "-m", "ansible_zygote.socket_dir", str(shared_tmp)],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
        **as_user(other_user),  # type: ignore[arg-type]
    )
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent.parent == shared_tmp and path.name == "server.sock"
    st = os.lstat(path.parent)
    assert st.st_uid == other_user.pw_uid and stat.S_IMODE(st.st_mode) == 0o700
    assert (shared_tmp / "ato-zygote.old.sock").exists()
    assert (shared_tmp / "ato-zygote.dead" / "server.sock").exists()


def test_the_clean_up_removes_dead_sockets_only(shared_tmp: Path):
    dead_socket(shared_tmp / "ato-zygote.old.sock")
    (shared_tmp / "ato-zygote.dead").mkdir(mode=0o700)
    dead_socket(shared_tmp / "ato-zygote.dead" / "server.sock")
    (shared_tmp / "ato-zygote.live").mkdir(mode=0o700)
    live = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    live.bind(str(shared_tmp / "ato-zygote.live" / "server.sock"))
    live.listen(1)
    with live:
        socket_dir.remove_stale(str(shared_tmp))
    assert sorted(p.name for p in shared_tmp.iterdir()) == ["ato-zygote.live"]


def test_a_long_tmpdir_gives_a_socket_path_that_fits(work: Path):
    deep = work / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = socket_dir.new_socket_path(str(deep))
    assert len(path) <= socket_dir.MAX_PATH and path.startswith("/tmp/ato-zygote.")
    os.rmdir(os.path.dirname(path))
