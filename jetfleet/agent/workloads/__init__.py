from jetfleet.agent.workloads.registry import WORKLOADS, WorkloadSpec, get_workload

__all__ = ["WORKLOADS", "WorkloadSpec", "get_workload"]
