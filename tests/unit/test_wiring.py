"""Every framework profile is wired everywhere a job kind must be, as kiali's hack/verify-*
checks do for its drift: a kind added to the registry and forgotten in one place fails here
with that place's name. The places are docs/architecture.md's "Adding a framework" list."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from training_jobs.registry import PROFILES
from training_kube.client import RESOURCES

# The CRDs carry the whole pod schema: libyaml reads them about ten times faster.
FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROOT = Path(__file__).resolve().parents[2]
# Profile names (tfjob, kubeflow_paddlejob, ...): the registry's unique key of a kind.
KINDS = sorted(PROFILES)
# The flags every kind is watched with (watches.yaml's comments say why).
STANDARD_WATCH = {
    "manageStatus": False,
    "markUnsafe": True,
    "snakeCaseParameters": False,
    "watchDependentResources": True,
    "watchAnnotationsChanges": True,
    "selector": {
        "matchExpressions": [
            {"key": "training.ato.dev/finished", "operator": "DoesNotExist"},
            {"key": "training.ato.dev/idle", "operator": "DoesNotExist"},
        ]
    },
}


def plural(name: str) -> str:
    profile = PROFILES[name]
    return RESOURCES[(profile.api_version, profile.kind)]


def group_version(name: str) -> tuple[str, str]:
    group, _, version = PROFILES[name].api_version.rpartition("/")
    return group, version


def load_all(path: Path) -> list:
    return [d for d in yaml.load_all(Loader=FAST, stream=path.read_text()) if d]


def watched_version(kind):
    """The version the runtime watches: the API version, or a served copy of it kept for the
    runtime alone (never stored) when another group has a kind of the same name and version."""
    group, version = group_version(kind)
    crd = yaml.load(
        Loader=FAST, stream=(ROOT / "config" / "crd" / "bases" / f"{group}_{plural(kind)}.yaml").read_text()
    )
    runtime_only = [v["name"] for v in crd["spec"]["versions"] if v["served"] and not v["storage"]]
    return runtime_only[0] if runtime_only else version


@pytest.mark.parametrize("kind", KINDS)
def test_watch_entry_with_the_standard_flags(kind):
    group, _ = group_version(kind)
    watches = yaml.load(Loader=FAST, stream=(ROOT / "watches.yaml").read_text())
    (entry,) = [w for w in watches if (w["group"], w["kind"]) == (group, PROFILES[kind].kind)]
    assert entry["version"] == watched_version(kind)
    assert {k: entry.get(k) for k in STANDARD_WATCH} == STANDARD_WATCH
    assert entry["playbook"] == "playbooks/reconcile.yml"
    assert entry["vars"] == {"training_job_role": kind}


def test_no_two_watches_share_the_runtimes_controller_name():
    # ansible-operator names each controller <kind>-<version>-controller and refuses to start
    # with two of one name.
    watches = yaml.load(Loader=FAST, stream=(ROOT / "watches.yaml").read_text())
    names = [f"{w['kind']}-{w['version']}-controller".lower() for w in watches]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("kind", KINDS)
def test_role_hands_the_cr_to_the_engine(kind):
    group, version = group_version(kind)
    (task,) = yaml.load(Loader=FAST, stream=(ROOT / "roles" / kind / "tasks" / "main.yml").read_text())
    assert task["ansible.builtin.import_role"] == {"name": "training_job"}
    variable = "_" + group.replace(".", "_") + "_" + PROFILES[kind].kind.lower()
    if watched_version(kind) == version:
        assert task["vars"] == {"training_job_cr": "{{ " + variable + " }}"}
    else:
        # Read through the runtime's copy, the job is still the API version's object.
        as_api = "combine({'apiVersion': '" + PROFILES[kind].api_version + "'})"
        assert task["vars"] == {"training_job_cr": "{{ " + variable + " | " + as_api + " }}"}


@pytest.mark.parametrize("kind", KINDS)
def test_crd_is_generated_and_installed(kind):
    group, version = group_version(kind)
    path = ROOT / "config" / "crd" / "bases" / f"{group}_{plural(kind)}.yaml"
    crd = yaml.load(Loader=FAST, stream=path.read_text())
    assert crd["spec"]["names"]["kind"] == PROFILES[kind].kind
    assert version in [v["name"] for v in crd["spec"]["versions"]]
    kustomization = yaml.load(
        Loader=FAST, stream=(ROOT / "config" / "crd" / "kustomization.yaml").read_text()
    )
    assert f"bases/{path.name}" in kustomization["resources"]


@pytest.mark.parametrize("kind", KINDS)
def test_operator_role_grants_what_the_engine_does(kind):
    group, _ = group_version(kind)
    rules = yaml.load(Loader=FAST, stream=(ROOT / "config" / "rbac" / "role.yaml").read_text())["rules"]

    def verbs(resource):
        return {
            v for r in rules if group in r["apiGroups"] and resource in r["resources"] for v in r["verbs"]
        }

    assert {"get", "list", "watch", "patch", "delete"} <= verbs(plural(kind))
    assert "patch" in verbs(f"{plural(kind)}/status")
    assert "update" in verbs(f"{plural(kind)}/finalizers")


@pytest.mark.parametrize("kind", KINDS)
def test_olm_install_test_waits_for_the_crd(kind):
    group, _ = group_version(kind)
    assert f"{plural(kind)}.{group}" in (ROOT / "hack" / "olm-test.sh").read_text()


@pytest.mark.parametrize("kind", KINDS)
def test_samples_on_cpus_and_on_gpus_and_a_user_guide(kind):
    profile = PROFILES[kind]
    samples = [d for p in (ROOT / "config" / "samples").glob("*.yaml") for d in load_all(p)]
    mine = [d for d in samples if (d.get("apiVersion"), d.get("kind")) == (profile.api_version, profile.kind)]
    on_gpus = ["nvidia.com/gpu" in yaml.safe_dump(d) for d in mine]
    assert True in on_gpus and False in on_gpus
    assert (ROOT / "docs" / f"user-guide-{kind.replace('_', '-')}.md").exists()


def test_removing_an_entry_fails_the_wiring_test(tmp_path, monkeypatch):
    """The test can fail: without TFJob's watch entry, its check raises."""
    watches = [
        w for w in yaml.load(Loader=FAST, stream=(ROOT / "watches.yaml").read_text()) if w["kind"] != "TFJob"
    ]
    fake_root = tmp_path
    (fake_root / "watches.yaml").write_text(yaml.safe_dump(watches))
    monkeypatch.setattr(__import__(__name__), "ROOT", fake_root)
    with pytest.raises(ValueError):
        test_watch_entry_with_the_standard_flags("tfjob")


@pytest.mark.parametrize("kind", KINDS)
def test_users_may_run_and_read_the_kind(kind):
    group, _ = group_version(kind)
    editor, viewer = load_all(ROOT / "config" / "rbac" / "job_roles.yaml")

    def granted(role, resource):
        return {
            v
            for r in role["rules"]
            if group in r["apiGroups"] and resource in r["resources"]
            for v in r["verbs"]
        }

    assert {"create", "delete", "get", "list", "watch"} <= granted(editor, plural(kind))
    assert {"get", "list", "watch"} <= granted(viewer, plural(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_the_bundle_owns_the_crd_and_project_lists_the_kind(kind):
    group, version = group_version(kind)
    (csv,) = load_all(
        ROOT / "config" / "manifests" / "bases" / "ansible-training-operator.clusterserviceversion.yaml"
    )
    owned = {(o["name"], o["version"], o["kind"]) for o in csv["spec"]["customresourcedefinitions"]["owned"]}
    assert (f"{plural(kind)}.{group}", version, PROFILES[kind].kind) in owned
    project = yaml.load(Loader=FAST, stream=(ROOT / "PROJECT").read_text())
    resources = {(f"{r['group']}.{r['domain']}", r["version"], r["kind"]) for r in project["resources"]}
    assert (group, version, PROFILES[kind].kind) in resources
