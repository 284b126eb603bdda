"""`porter deploy --kube`: the SpinKube manifest, parsed as YAML and checked field by field against
the shape `spin kube scaffold` writes (a SpinApp, with an HPA or a KEDA ScaledObject when
autoscaled), the OCI reference checks, and the one-line refusals of the command line. The dry
run and the real `spin registry push` of a built component to a registry on loopback are in
tests/test_generate_service.py, beside the build they use."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from fixtures import REPO, assert_one_line_error
from porter.errors import PorterError
from porter.serve.kube import Scaling, app_name, check_reference, check_scaling, spinapp_documents, to_yaml

IMAGE = "ghcr.io/someone/tinystories_gen.v2:0.1.0"


def documents(scaling: Scaling, image: str = IMAGE) -> list[dict]:
    return list(yaml.safe_load_all(to_yaml(spinapp_documents(image, scaling))))


def test_fixed_replicas():
    [app] = documents(Scaling(replicas=4, cpu_limit="500m", memory_limit="256Mi", cpu_request="250m"))
    assert app["apiVersion"] == "core.spinkube.dev/v1alpha1"
    assert app["kind"] == "SpinApp"
    assert app["metadata"] == {"name": "tinystories-gen-v2"}
    assert app["spec"] == {
        "image": IMAGE,
        "executor": "containerd-shim-spin",
        "replicas": 4,
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "250m"}},
    }


def test_no_resources_unless_asked():
    [app] = documents(Scaling())
    assert app["spec"] == {"image": IMAGE, "executor": "containerd-shim-spin", "replicas": 2}


def test_hpa():
    app, hpa = documents(Scaling(replicas=1, max_replicas=10, autoscaler="hpa", cpu_limit="1", memory_limit="512Mi"))
    assert app["spec"]["enableAutoscaling"] is True and "replicas" not in app["spec"]
    assert app["spec"]["resources"] == {"limits": {"cpu": "1", "memory": "512Mi"}}
    assert (hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert hpa["metadata"] == {"name": "tinystories-gen-v2-autoscaler"}
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "tinystories-gen-v2"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 10)
    assert spec["metrics"] == [
        {"type": "Resource", "resource": {"name": name, "target": {"type": "Utilization", "averageUtilization": 60}}}
        for name in ("cpu", "memory")]


def test_keda():
    app, scaled = documents(Scaling(replicas=0, max_replicas=5, autoscaler="keda", cpu_limit="2", memory_limit="1Gi"))
    assert app["spec"]["enableAutoscaling"] is True
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == app["metadata"]["name"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 5)
    assert spec["triggers"] == [{"type": name, "metricType": "Utilization", "metadata": {"value": "60"}}
                                for name in ("cpu", "memory")]


@pytest.mark.parametrize("image, name", [
    ("localhost:5000/generate:0.1.0", "generate"),
    ("generate", "generate"),
    ("registry.example.com/a/b/c__d@sha256:" + "ab" * 32, "c-d"),
])
def test_good_references(image, name):
    assert check_reference(image) == image
    assert app_name(image) == name


@pytest.mark.parametrize("image", ["", "ghcr.io/Someone/app:1", "app:", "ghcr.io//app", "a b", "app:1:2",
                                   "app@sha256:12"])
def test_bad_references(image):
    with pytest.raises(PorterError, match="--image|--kube needs --image"):
        check_reference(image)


@pytest.mark.parametrize("scaling, fragment", [
    (Scaling(replicas=-1), "--replicas -1"),
    (Scaling(cpu_limit="lots"), "--cpu-limit 'lots'"),
    (Scaling(autoscaler="hpa", cpu_limit="1"), "needs --cpu-limit and --memory-limit"),
    (Scaling(autoscaler="keda", replicas=4, max_replicas=3, cpu_limit="1", memory_limit="1Gi"), "--max-replicas 3"),
])
def test_bad_scaling(scaling, fragment):
    with pytest.raises(PorterError, match=fragment.replace("-", r"\-")):
        check_scaling(scaling)


def deploy(*args):
    return subprocess.run([sys.executable, str(REPO / "cli.py"), "deploy", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO)


@pytest.mark.parametrize("args, fragments", [
    (["--kube"], ["--kube needs --image REF"]),
    (["--kube", "--image", "Bad/Ref"], ["--image 'Bad/Ref'", "OCI reference"]),
    (["--kube", "--image", "r/app:1", "--autoscaler", "hpa"], ["needs --cpu-limit and --memory-limit"]),
    (["--kube", "--image", "r/app:1", "--listen", "127.0.0.1:3000"], ["--listen", "does not apply to --kube"]),
    (["--image", "r/app:1"], ["are for --kube", "--up"]),
    (["--kube", "--build", "--image", "r/app:1"], ["choose one of", "--build, --kube"]),
])
def test_refusals_are_one_line(tmp_path, args, fragments):
    assert_one_line_error(deploy(tmp_path / "nothing-built", *args), *fragments)


def test_missing_component_is_one_line(tmp_path):
    result = deploy(tmp_path / "nothing-built", "--kube", "--image", "localhost:5000/app:1", "--dry-run")
    assert_one_line_error(result, "not a built service")
