"""`porter deploy --kube`: the SpinKube manifest of a built service and the `spin registry push`
that puts the app where the cluster pulls it from.

SpinKube (spinkube.dev) runs a Spin app on Kubernetes from an OCI artifact: its operator turns a
`SpinApp` resource (core.spinkube.dev/v1alpha1) into a Deployment whose pods run the component
with the containerd-shim-spin executor. The manifest has the shape `spin kube scaffold` writes:
spec.image, spec.executor, then either spec.replicas or spec.enableAutoscaling with a
HorizontalPodAutoscaler (`--autoscaler hpa`) or a KEDA ScaledObject (`keda`) that scales the
Deployment between the minimum (`--replicas`) and `--max-replicas` on CPU and memory
utilisation (60 % each, scaffold's default), and spec.resources. porter writes it and pushes the
app; applying it (`kubectl apply -f`) is the cluster owner's step: porter runs no cluster.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from porter.errors import PorterError

API_VERSION = "core.spinkube.dev/v1alpha1"
EXECUTOR = "containerd-shim-spin"
AUTOSCALERS = ("hpa", "keda")
TARGET_UTILIZATION_PERCENT = 60
SPINAPP_YAML = "spinapp.yaml"

# An OCI reference as the distribution project's grammar spells it: [host[:port]/]path[:tag][@digest],
# path components lower case.
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REFERENCE = re.compile(rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
                       r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$")
# A string YAML reads back as that string when written plain: a letter first, no YAML syntax,
# and not one of YAML 1.1's words for booleans and null (checked apart).
PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9./_-]*$")
YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
# A Kubernetes resource quantity: 500m, 1, 0.5, 128Mi, 1G.
QUANTITY = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


@dataclass(frozen=True)
class Scaling:
    """How many pods, and what each may use (Kubernetes quantities, or None to leave unset)."""

    replicas: int = 2
    max_replicas: int = 3
    autoscaler: str | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None
    cpu_request: str | None = None
    memory_request: str | None = None


def check_reference(image: str | None) -> str:
    if not image:
        raise PorterError("--kube needs --image REF: the OCI reference to push the app to and that the SpinApp "
                          "pulls, e.g. ghcr.io/you/generate:0.1.0")
    if not REFERENCE.match(image):
        raise PorterError(f"--image {image!r} is not an OCI reference: give [REGISTRY[:PORT]/]NAME[:TAG], lower-case "
                          "NAME components, e.g. ghcr.io/you/generate:0.1.0")
    return image


def app_name(image: str) -> str:
    """The SpinApp's name, as `spin kube scaffold` takes it: the reference's last path component,
    here with '.' and '_' made '-' so that it is a valid Kubernetes name."""
    last = REFERENCE.match(image)["path"].rsplit("/", 1)[-1]
    return re.sub(r"[._]+", "-", last)[:63].strip("-")


def check_scaling(scaling: Scaling) -> None:
    if scaling.replicas < 0:
        raise PorterError(f"--replicas {scaling.replicas}: the (minimum) replica count must not be negative")
    for flag, value in (("--cpu-limit", scaling.cpu_limit), ("--memory-limit", scaling.memory_limit),
                        ("--cpu-request", scaling.cpu_request), ("--memory-request", scaling.memory_request)):
        if value is not None and not QUANTITY.match(value):
            raise PorterError(f"{flag} {value!r} is not a Kubernetes quantity, e.g. 500m or 1 (CPU), 256Mi (memory)")
    if scaling.autoscaler is None:
        return
    if scaling.autoscaler not in AUTOSCALERS:
        raise PorterError(f"--autoscaler {scaling.autoscaler}: choose {' or '.join(AUTOSCALERS)}")
    if scaling.max_replicas < scaling.replicas:
        raise PorterError(f"--max-replicas {scaling.max_replicas} is below --replicas {scaling.replicas} "
                          "(the autoscaler's minimum)")
    if scaling.cpu_limit is None or scaling.memory_limit is None:
        raise PorterError("--autoscaler needs --cpu-limit and --memory-limit: utilisation is measured against them")


def spinapp_documents(image: str, scaling: Scaling) -> list[dict]:
    """The SpinApp, and its autoscaler when there is one, as `spin kube scaffold` writes them."""
    name = app_name(image)
    spec: dict = {"image": image, "executor": EXECUTOR}
    if scaling.autoscaler:
        spec["enableAutoscaling"] = True
    else:
        spec["replicas"] = scaling.replicas
    limits = {k: v for k, v in (("cpu", scaling.cpu_limit), ("memory", scaling.memory_limit)) if v}
    requests = {k: v for k, v in (("cpu", scaling.cpu_request), ("memory", scaling.memory_request)) if v}
    if limits or requests:
        spec["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    documents = [{"apiVersion": API_VERSION, "kind": "SpinApp", "metadata": {"name": name}, "spec": spec}]
    if scaling.autoscaler:
        documents.append(_autoscaler(name, scaling))
    return documents


def _autoscaler(name: str, scaling: Scaling) -> dict:
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    metadata = {"name": f"{name}-autoscaler"}
    resources = ("cpu", "memory")
    if scaling.autoscaler == "hpa":
        metrics = [{"type": "Resource", "resource": {"name": resource, "target": {
            "type": "Utilization", "averageUtilization": TARGET_UTILIZATION_PERCENT}}} for resource in resources]
        return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": metadata,
                "spec": {"scaleTargetRef": target, "minReplicas": scaling.replicas,
                         "maxReplicas": scaling.max_replicas, "metrics": metrics}}
    triggers = [{"type": resource, "metricType": "Utilization",
                 "metadata": {"value": str(TARGET_UTILIZATION_PERCENT)}} for resource in resources]
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": metadata,
            "spec": {"scaleTargetRef": target, "minReplicaCount": scaling.replicas,
                     "maxReplicaCount": scaling.max_replicas, "triggers": triggers}}


def to_yaml(documents: list[dict]) -> str:
    """Block-style YAML, documents separated by `---`. A string is written plain only where YAML
    reads it back as that string; otherwise JSON-quoted, which YAML reads as a double-quoted
    scalar, so no value can turn into another type."""
    return "---\n".join("\n".join(_yaml_lines(document, 0)) + "\n" for document in documents)


def _yaml_lines(value, indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines.extend(_yaml_lines(item, indent + 2))
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
    else:
        for item in value:
            nested = _yaml_lines(item, indent + 2)
            lines.append(f"{pad}- {nested[0].lstrip()}")
            lines.extend(nested[1:])
    return lines


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if PLAIN.match(value) and value.lower() not in YAML_WORDS:
        return value
    return json.dumps(value)


def push_arguments(manifest, image: str, extra: tuple[str, ...] = ()) -> list[str]:
    """`spin registry push`'s arguments: the app of the Spin manifest to the reference."""
    return ["registry", "push", "--from", str(manifest), *extra, image]
