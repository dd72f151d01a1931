"""MVU (MagVarUpdate) state: records, initialisation, the command grammar and its execution, schemas.

Rule book: ../shared/research/mvu-semantics.md (file:line citations into MagicalAstrogy/MagVarUpdate at
b428179; where it and the code differ, the code wins). Pure logic: no store, service or UI imports; the
service (`service.mvu`) reads and commits records through the session log (`mvu.records`).

Modules: `jsutil` (lodash/JS value semantics), `values` (value parsing), `commands` (finding commands),
`update` (running them), `schema`, `init` ([InitVar] and greeting initialisation), `records` (log fold).
"""

from tavern_tui.mvu.commands import Command, extract_commands, parse_parameters, path_fix
from tavern_tui.mvu.init import InitBook, InitResult, empty_record, has_mvu_material, initial_record
from tavern_tui.mvu.records import MVU_PART, MvuHead, commit_part, mvu_head, snapshot_variables
from tavern_tui.mvu.schema import generate_schema, reconcile_schema
from tavern_tui.mvu.update import Change, UpdateOutcome, update_variables
from tavern_tui.mvu.values import parse_command_value, parse_string

__all__ = ["MVU_PART", "Change", "Command", "InitBook", "InitResult", "MvuHead", "UpdateOutcome", "commit_part",
           "empty_record", "extract_commands", "generate_schema", "has_mvu_material", "initial_record", "mvu_head",
           "parse_command_value", "parse_parameters", "parse_string", "path_fix", "reconcile_schema",
           "snapshot_variables", "update_variables"]
