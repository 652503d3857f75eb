"""deepep-a4 policy pack: `pulumi preview --policy-pack policy` (the rules are in rules.py)."""

from pulumi_policy import EnforcementLevel, PolicyPack

from deepep_a4.policy.pack import PACK_NAME, policies

PolicyPack(name=PACK_NAME, policies=policies(), enforcement_level=EnforcementLevel.MANDATORY)
