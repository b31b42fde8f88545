"""hack/image-local.sh builds the image the Dockerfile describes, from hack/image-local/layout.py:
the Dockerfile and the layout stay in step (copied paths, environment, bytecode, user, working
directory, entrypoint, base version), and the layout's runtime part is the runtime image's."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KNOWN = {"FROM", "ENV", "COPY", "RUN", "USER", "WORKDIR", "ENTRYPOINT"}


def load_layout():
    spec = importlib.util.spec_from_file_location("image_layout", ROOT / "hack" / "image-local" / "layout.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


layout = load_layout()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; comments dropped, continuation lines joined."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), value)


def dockerfile_view(text: str) -> dict:
    """What a build of ``text`` on the runtime image gives, in layout.py's terms."""
    env = dict(layout.RUNTIME_ENV)
    view: dict = {"env": [], "copies": [], "runs": [], "users": [], "workdir": layout.RUNTIME_WORKDIR}
    for word, args in instructions(text):
        if word == "FROM":
            view["from"] = args
        elif word == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                env[name] = expand(value, env)
                view["env"].append((name, env[name]))
        elif word == "COPY":
            source, dest = shlex.split(args)
            view["copies"].append((source, expand(dest, env)))
        elif word == "RUN":
            view["runs"].append(
                (view["users"][-1] if view["users"] else layout.RUNTIME_USER, expand(args, env))
            )
        elif word == "USER":
            view["users"].append(expand(args, env))
        elif word == "WORKDIR":
            view["workdir"] = expand(args, env)
        elif word == "ENTRYPOINT":
            view["entrypoint"] = json.loads(args)
        view.setdefault("unknown", []).extend([word] if word not in KNOWN else [])
    return view


def versions() -> dict[str, str]:
    pairs = re.findall(r"^([A-Z_]+)=(\S+)", (ROOT / "versions.env").read_text(), re.M)
    return dict(pairs)


def compiled_paths(run: str) -> list[str] | None:
    words = shlex.split(run)
    if words[:3] != ["python3", "-m", "compileall"]:
        return None
    return [w for w in words[3:] if not w.startswith("-")]


def drift(text: str) -> list[str]:
    """Every difference between the Dockerfile ``text`` and layout.py."""
    view, problems = dockerfile_view(text), []
    if view.get("from") != versions()["ANSIBLE_OPERATOR_IMAGE"]:
        problems.append(f"FROM {view.get('from')} is not versions.env's ANSIBLE_OPERATOR_IMAGE")
    if view["env"] != layout.PROJECT_ENV:
        problems.append(f"ENV {view['env']} != layout.PROJECT_ENV {layout.PROJECT_ENV}")
    if view["copies"] != layout.PROJECT_COPIES:
        problems.append(f"COPY {view['copies']} != layout.PROJECT_COPIES {layout.PROJECT_COPIES}")
    compiles = [(user, compiled_paths(run)) for user, run in view["runs"]]
    if compiles != [("0", layout.PROJECT_COMPILED)]:
        problems.append(
            f"RUN {view['runs']}: layout.py compiles {layout.PROJECT_COMPILED} as root, nothing else"
        )
    final_user = view["users"][-1] if view["users"] else layout.RUNTIME_USER
    if final_user != layout.PROJECT_USER or final_user != str(layout.USER_UID):
        problems.append(f"USER {final_user} != layout's {layout.PROJECT_USER}")
    if view["workdir"] != layout.RUNTIME_WORKDIR:
        problems.append(f"WORKDIR {view['workdir']} != layout's {layout.RUNTIME_WORKDIR}")
    if view.get("entrypoint") != layout.ENTRYPOINT:
        problems.append(f"ENTRYPOINT {view.get('entrypoint')} != layout.ENTRYPOINT")
    if view["unknown"]:
        problems.append(f"instructions layout.py does not model: {view['unknown']}")
    return problems


def test_dockerfile_and_layout_agree():
    assert drift((ROOT / "Dockerfile").read_text()) == []


DOCKERFILE = (ROOT / "Dockerfile").read_text()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("ANSIBLE_GATHERING=explicit", "ANSIBLE_GATHERING=smart"),
        ("ENV ANSIBLE_ZYGOTE=true", "ENV ANSIBLE_ZYGOTE=true OTHER=1"),
        ("COPY playbooks/ ${HOME}/playbooks/", "COPY playbooks/ ${HOME}/books/"),
        ('"${HOME}/filter_plugins"\n', '"${HOME}/filter_plugins" "${HOME}/roles"\n'),
        ("USER 0\n", ""),
        ("USER 1001\n", ""),
        ("--watches-file=./watches.yaml", "--watches-file=watches.yaml"),
        ("ENTRYPOINT", "LABEL a=b\nENTRYPOINT"),
        (
            "FROM quay.io/operator-framework/ansible-operator:",
            "FROM quay.io/operator-framework/ansible-operator:v0",
        ),
    ],
)
def test_a_changed_dockerfile_is_drift(old, new):
    assert old in DOCKERFILE
    assert drift(DOCKERFILE.replace(old, new, 1))


def load_oci_image():
    spec = importlib.util.spec_from_file_location("oci_image", ROOT / "hack" / "real-node" / "oci_image.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_image_config_is_the_layouts():
    """layout.py's arguments through oci_image.py's own parser give the Dockerfile's config."""
    oci_image = load_oci_image()
    args = oci_image.argument_parser().parse_args(["--ref=r", "--out=o", *layout.oci_args()])
    config = oci_image.image_config(args, "0" * 64)["config"]
    assert config["Entrypoint"] == layout.ENTRYPOINT
    assert config["User"] == "1001:0" and config["WorkingDir"] == layout.HOME
    assert config["Env"][1:] == [f"{k}={v}" for k, v in layout.RUNTIME_ENV + layout.PROJECT_ENV]
    assert config["Env"][0] == "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def test_make_image_local_runs_the_script():
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(ROOT), "image-local"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["hack/image-local.sh"]
    helptext = subprocess.run(
        ["make", "-C", str(ROOT), "help"], capture_output=True, text=True, check=True
    ).stdout
    assert "image-local" in helptext


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        ("ansible-training-operator:0.1.0", "docker.io/library/ansible-training-operator:0.1.0"),
        ("me/ato:1", "docker.io/me/ato:1"),
        ("quay.io/me/ato:1", "quay.io/me/ato:1"),
        ("localhost:5000/ato:1", "localhost:5000/ato:1"),
        ("localhost/ato:1", "localhost/ato:1"),
    ],
)
def test_reference_is_what_the_kubelet_asks_for(image, reference):
    assert layout.reference(image) == reference


def runtime_dockerfile() -> str:
    """The runtime image's Dockerfile from the Go module cache (hack/build-go-tools.sh
    ansible-operator downloads the module); nothing is fetched here."""
    try:
        cache = subprocess.run(
            ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        cache = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    version = versions()["ANSIBLE_OPERATOR_VERSION"]
    path = Path(cache) / f"github.com/operator-framework/ansible-operator-plugins@{version}"
    dockerfile = path / "images" / "ansible-operator" / "Dockerfile"
    if not dockerfile.is_file():
        pytest.skip(f"{dockerfile} not downloaded (hack/build-go-tools.sh ansible-operator)")
    return dockerfile.read_text()


def test_runtime_part_is_the_runtime_images():
    text = runtime_dockerfile()
    env: dict[str, str] = {}
    for word, args in instructions(text):
        if word == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                env[name] = expand(value, env)
    assert {k: env[k] for k, _ in layout.RUNTIME_ENV} == dict(layout.RUNTIME_ENV)
    final = [(w, a) for w, a in instructions(text.rpartition("AS final")[2])]
    assert ("WORKDIR", "${HOME}") in final and ("USER", "${USER_UID}") in final
    entrypoint = json.loads(dict(final)["ENTRYPOINT"])
    assert entrypoint[:2] == [layout.TINI, "--"] and entrypoint[2] == layout.OPERATOR_BINARY
    passwd = "${USER_NAME}:x:${USER_UID}:0:${USER_NAME} user:${HOME}:/sbin/nologin"
    assert passwd in text and expand(passwd, env) == layout.RUNTIME_PASSWD_LINE
    for path, content in layout.RUNTIME_FILES.items():
        for line in content.splitlines():
            assert re.search(rf"echo (['\"]){re.escape(line)}\1 >>? {re.escape(path)}", text), (path, line)
