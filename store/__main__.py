"""The artifact store's bucket (docs/store.md): `cd store && pulumi up -s demo`."""

import pulumi
import pulumi_gcp as gcp

from components.store import ArtifactStoreBucket, store_settings

try:
    settings = store_settings(pulumi.Config("deepep-a4-store"))
except ValueError as err:
    raise pulumi.RunError(str(err)) from None

provider = gcp.Provider("gcp", project=settings.project)
store = ArtifactStoreBucket("artifacts", settings, pulumi.ResourceOptions(providers=[provider]))
pulumi.export("artifactStore", store.url)
