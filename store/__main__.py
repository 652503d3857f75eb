"""The artifact store, the bucket's side: its own Pulumi project, making the bucket and the remote builder's identity
(docs/store.md), under the policy pack: `cd store && pulumi up --policy-pack ../policy -s demo`. The other sides:
the workstation commands (deepep_a4/store/), the benchmark stacks' grants (components/node/store_grants.py) and
the node's reader (scripts/install/store.sh)."""

import pulumi
import pulumi_gcp as gcp

from components.node.store_grants import ArtifactStoreBucket, StoreBuilder, store_settings

try:
    settings = store_settings(pulumi.Config("deepep-a4-store"))
except ValueError as err:
    raise pulumi.RunError(str(err)) from None

provider = gcp.Provider("gcp", project=settings.project)
store = ArtifactStoreBucket("artifacts", settings, pulumi.ResourceOptions(providers=[provider]))
builder = StoreBuilder("builder", settings, store.bucket.name, pulumi.ResourceOptions(providers=[provider]))
pulumi.export("artifactStore", store.url)
pulumi.export("storeBuilder", builder.account.email)
