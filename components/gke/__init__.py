"""The GKE platform: cluster, node pools, multi-network, workloads, gIB, staging, deadline, pod security."""
