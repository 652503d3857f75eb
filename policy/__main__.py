"""deepep-a4 policy pack: `pulumi preview --policy-pack policy` (the rules are in rules.py)."""

from pack import PACK_NAME, policies
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(name=PACK_NAME, policies=policies(), enforcement_level=EnforcementLevel.MANDATORY)
