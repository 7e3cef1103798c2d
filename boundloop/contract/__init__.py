"""Loop contracts: a loop declared in JSON, checked, compiled; and a lint for hand-written loops.

A contract (`loop-contract.schema.json`) names the model, the system prompt, the tools, the
stop_reason -> signal handler map, the budget, the policy (inline or a `loop-policy.json` file) and
the metrics. `check_contract` applies the schemas and the loop's rules;
`AgentLoop.from_contract` builds the loop; `AgentLoop.to_contract` writes one back.
"""

from ._check import BUILTIN_HANDLERS, CONTRACT_SCHEMA, HANDLER_NAME, POLICY_SCHEMA, UNHANDLED, Problem
from ._compile import compile_module
from ._contract import Contract, ContractTool, check_contract, load_contract
from ._lint import RULES as LINT_RULES
from ._lint import Finding, lint_paths, lint_source
from ._review import compile_report
from ._rules import RULES

__all__ = [
    "BUILTIN_HANDLERS",
    "CONTRACT_SCHEMA",
    "Contract",
    "ContractTool",
    "Finding",
    "HANDLER_NAME",
    "LINT_RULES",
    "POLICY_SCHEMA",
    "Problem",
    "RULES",
    "UNHANDLED",
    "check_contract",
    "compile_module",
    "compile_report",
    "lint_paths",
    "lint_source",
    "load_contract",
]
