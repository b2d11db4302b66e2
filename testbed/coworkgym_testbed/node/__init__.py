"""The test-bed's node: containerd + runc (Debian) under a kubelet built from the same Go
modules as the control plane, pods on a CNI bridge, NetworkPolicies enforced by kube-router.

components.py holds the processes (started and stopped like the control plane's); host.py
what they make on the machine and how teardown removes it.
"""

from ..pki import NODE_IP, NODE_NAME
from .components import NODE_COMPONENTS, api_node_port, s3_node_endpoint
from .host import BRIDGE, NodeError, teardown, unmount_below

__all__ = [
    "BRIDGE",
    "NODE_COMPONENTS",
    "NODE_IP",
    "NODE_NAME",
    "NodeError",
    "api_node_port",
    "s3_node_endpoint",
    "teardown",
    "unmount_below",
]
