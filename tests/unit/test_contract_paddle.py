"""PaddleFlow paddle-operator v0.3.5's pod env and ConfigMap.

paddle-operator has no unit test for these (its only envtest scenario, "test wide-and-deep in
service mode", asserts ``status.mode == PS``). Rows marked "design doc" reproduce the resulting
pods of ``docs/design`` (the ``wide-ande-deep`` job, seed 003); the rest follow
``controllers/paddlejob_helper.go`` (``constructPod``, ``constructConfigMap``,
``constructService4Pod``, ``getPaddleJobMode``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from training_jobs.contracts import paddle

FIELD_POD_IP = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def role_env(pod_ip, index, role):
    return [
        pod_ip,
        {"name": "PADDLE_TRAINER_ID", "value": str(index)},
        {"name": "TRAINING_ROLE", "value": role},
        {"name": "PADDLE_TRAINING_ROLE", "value": role},
    ]


CM_REF = [{"configMapRef": {"name": "wide-ande-deep"}}]


@pytest.mark.parametrize(
    ("case", "res_type", "index", "intranet", "elastic", "expected"),
    [
        # design doc: wide-ande-deep-ps-0 in PodIP mode (the doc's stored pod also shows the
        # apiVersion: v1 the API server adds to the fieldRef).
        (
            "ps-0, PodIP",
            "ps",
            0,
            "PodIP",
            False,
            {"env": role_env(FIELD_POD_IP, 0, "PSERVER"), "envFrom": CM_REF},
        ),
        # design doc: wide-ande-deep-worker-0 in PodIP mode.
        (
            "worker-0, PodIP",
            "worker",
            0,
            "PodIP",
            False,
            {"env": role_env(FIELD_POD_IP, 0, "TRAINER"), "envFrom": CM_REF},
        ),
        # An empty intranet behaves like PodIP.
        (
            "worker-1, default intranet",
            "worker",
            1,
            "",
            False,
            {"env": role_env(FIELD_POD_IP, 1, "TRAINER"), "envFrom": CM_REF},
        ),
        # Service mode: POD_IP is the pod's own name, resolvable through its per-pod Service.
        (
            "worker-1, Service",
            "worker",
            1,
            "Service",
            False,
            {
                "env": role_env({"name": "POD_IP", "value": "wide-ande-deep-worker-1"}, 1, "TRAINER"),
                "envFrom": CM_REF,
            },
        ),
        (
            "heter-2, Host",
            "heter",
            2,
            "Host",
            False,
            {"env": role_env(FIELD_POD_IP, 2, "HETER"), "envFrom": CM_REF},
        ),
        # Elastic: PADDLE_ELASTIC_* instead of the ConfigMap.
        (
            "elastic worker",
            "worker",
            0,
            "PodIP",
            True,
            {
                "env": [
                    *role_env(FIELD_POD_IP, 0, "TRAINER"),
                    {"name": "PADDLE_ELASTIC_JOB_ID", "value": "paddle-system-wide-ande-deep"},
                    {"name": "PADDLE_ELASTIC_NP", "value": "2"},
                    {"name": "PADDLE_ELASTIC_TIMEOUT", "value": "60"},
                ],
                "envFrom": [],
            },
        ),
    ],
)
def test_pod_env(case, res_type, index, intranet, elastic, expected):
    got = paddle.pod_env("wide-ande-deep", "paddle-system", res_type, index, intranet, elastic, 2)
    assert got == expected


@pytest.mark.parametrize(
    ("res_type", "elastic", "workers", "message"),
    [
        ("chief", False, 2, "unknown PaddleJob resource type"),
        ("worker", True, None, "needs a worker spec"),
    ],
)
def test_pod_env_rejects_what_upstream_cannot_build(res_type, elastic, workers, message):
    with pytest.raises(ValueError, match=message):
        paddle.pod_env("j", "ns", res_type, 0, "PodIP", elastic, workers)


@pytest.mark.parametrize(
    ("case", "endpoints", "intranet", "with_gloo", "port", "expected"),
    [
        # Service mode PS job (wide_and_deep_service.yaml shape): names on 36000, gloo on 36018.
        (
            "PS, Service, gloo",
            {"ps": ["wd-ps-0", "wd-ps-1"], "worker": ["wd-worker-0", "wd-worker-1"]},
            "Service",
            1,
            45600,
            {
                "TRAINER_PORTS_NUM": "20",
                "PADDLE_PORT": "36000",
                "PADDLE_PSERVERS_IP_PORT_LIST": "wd-ps-0:36000,wd-ps-1:36000",
                "PADDLE_TRAINER_ENDPOINTS": "wd-worker-0:36000,wd-worker-1:36000",
                "PADDLE_TRAINERS": "wd-worker-0,wd-worker-1",
                "PADDLE_TRAINERS_NUM": "2",
                "PADDLE_WITH_GLOO": "1",
                "PADDLE_GLOO_RENDEZVOUS": "3",
                "PADDLE_GLOO_HTTP_ENDPOINT": "wd-ps-0:36018",
            },
        ),
        # PodIP mode on the job's port: the ":36000" replacement finds nothing, so the gloo
        # endpoint is ps-0's own endpoint - upstream's quirk, kept.
        (
            "PS, PodIP, gloo quirk",
            {"ps": ["10.0.0.1"], "worker": ["10.0.0.2", "10.0.0.3"]},
            "PodIP",
            2,
            45600,
            {
                "TRAINER_PORTS_NUM": "20",
                "PADDLE_PORT": "45600",
                "PADDLE_PSERVERS_IP_PORT_LIST": "10.0.0.1:45600",
                "PADDLE_TRAINER_ENDPOINTS": "10.0.0.2:45600,10.0.0.3:45600",
                "PADDLE_TRAINERS": "10.0.0.2,10.0.0.3",
                "PADDLE_TRAINERS_NUM": "2",
                "PADDLE_WITH_GLOO": "2",
                "PADDLE_GLOO_RENDEZVOUS": "3",
                "PADDLE_GLOO_HTTP_ENDPOINT": "10.0.0.1:45600",
            },
        ),
        # A job whose port happens to be 36000 does get the :36018 replacement.
        (
            "PS, Host, port 36000",
            {"ps": ["192.168.1.5"], "worker": ["192.168.1.6"]},
            "Host",
            1,
            36000,
            {
                "TRAINER_PORTS_NUM": "20",
                "PADDLE_PORT": "36000",
                "PADDLE_PSERVERS_IP_PORT_LIST": "192.168.1.5:36000",
                "PADDLE_TRAINER_ENDPOINTS": "192.168.1.6:36000",
                "PADDLE_TRAINERS": "192.168.1.6",
                "PADDLE_TRAINERS_NUM": "1",
                "PADDLE_WITH_GLOO": "1",
                "PADDLE_GLOO_RENDEZVOUS": "3",
                "PADDLE_GLOO_HTTP_ENDPOINT": "192.168.1.5:36018",
            },
        ),
        # Collective mode: withGloo is silently ignored without a ps spec (upstream issue #38).
        (
            "collective ignores gloo",
            {"worker": ["10.0.0.2", "10.0.0.3"]},
            "PodIP",
            1,
            41000,
            {
                "TRAINER_PORTS_NUM": "20",
                "PADDLE_PORT": "41000",
                "PADDLE_TRAINER_ENDPOINTS": "10.0.0.2:41000,10.0.0.3:41000",
                "PADDLE_TRAINERS": "10.0.0.2,10.0.0.3",
                "PADDLE_TRAINERS_NUM": "2",
            },
        ),
        # Heterogeneous PS: heter endpoints get their own key; no gloo without withGloo.
        (
            "ps + worker + heter",
            {"ps": ["h-ps-0"], "worker": ["h-worker-0"], "heter": ["h-heter-0", "h-heter-1"]},
            "Service",
            0,
            41000,
            {
                "TRAINER_PORTS_NUM": "20",
                "PADDLE_PORT": "36000",
                "PADDLE_PSERVERS_IP_PORT_LIST": "h-ps-0:36000",
                "PADDLE_TRAINER_ENDPOINTS": "h-worker-0:36000",
                "PADDLE_TRAINERS": "h-worker-0",
                "PADDLE_TRAINERS_NUM": "1",
                "PADDLE_HETER_ENDPOINTS": "h-heter-0:36000,h-heter-1:36000",
            },
        ),
    ],
)
def test_configmap_data(case, endpoints, intranet, with_gloo, port, expected):
    assert paddle.configmap_data(endpoints, intranet, with_gloo, port) == expected


def test_service_ports_are_twenty_named_ports_from_36000():
    ports = paddle.service_ports()
    assert len(ports) == 20
    assert ports[0] == {"name": "p-0", "port": 36000}
    assert ports[18] == {"name": "p-18", "port": 36018}  # the gloo HTTP port
    assert ports[-1] == {"name": "p-19", "port": 36019}


@pytest.mark.parametrize(
    ("policy", "completed", "expected"),
    [
        # controllers/paddlejob_controller.go Reconcile: Completed cleans under "", Always and
        # OnCompletion; Failed under Always and OnFailure.
        (None, True, True),
        ("", True, True),
        (None, False, False),
        ("Always", True, True),
        ("Always", False, True),
        ("Never", True, False),
        ("Never", False, False),
        ("OnCompletion", True, True),
        ("OnCompletion", False, False),
        ("OnFailure", True, False),
        ("OnFailure", False, True),
        ("Sometimes", True, False),  # the upstream CRD takes any string; only these four match
    ],
)
def test_cleans_up(policy, completed, expected):
    assert paddle.cleans_up(policy, completed) is expected


@pytest.mark.parametrize(
    ("ps", "workers", "expected"),
    [
        # paddlejob_controller_test.go "test wide-and-deep in service mode": 3 ps + 2 workers is PS.
        (3, 2, "PS"),
        (0, 2, "PS"),  # the spec's presence decides, not its replicas
        (None, 2, "Collective"),
        (None, 1, "Single"),
        (None, None, "Single"),
    ],
)
def test_mode(ps, workers, expected):
    assert paddle.mode(ps, workers) == expected


@pytest.mark.parametrize(
    ("res_type", "intranet", "elastic", "template_policy", "expected"),
    [
        ("worker", "Service", False, "", "OnFailure"),
        ("ps", "Service", False, "", "Never"),
        ("worker", "PodIP", False, "", "Never"),
        ("worker", "PodIP", False, "Always", "Always"),
        ("ps", "PodIP", True, "Never", "OnFailure"),  # elastic overrides even the template
    ],
)
def test_default_restart_policy(res_type, intranet, elastic, template_policy, expected):
    assert paddle.default_restart_policy(res_type, intranet, elastic, template_policy) == expected


@pytest.mark.parametrize(
    ("uid", "expected"),
    [
        # UIDs of the design doc's PaddleJobs; pinned so a change of derivation is noticed.
        ("f206587f-5dee-46f5-9399-e835bde02487", 50080),
        ("8f432e67-8cda-482c-b147-91f9d4400067", 45600),
    ],
)
def test_job_port_is_a_pure_function_of_the_uid(uid, expected):
    assert paddle.job_port(uid) == expected


@given(st.text())
def test_job_port_leaves_room_for_the_twenty_ports(uid):
    port = paddle.job_port(uid)
    assert (port - 36000) % 20 == 0
    assert port >= 36000 and port + 19 < 56000
