"""`deepep-a4 store`: the workstation side of the artifact store (fill it, build and publish its artifacts locally or
on Cloud Build, print the manifest to pin). The other sides: the bucket itself is the top-level Pulumi project
store/, its grants to nodes and builder are components/node/store_grants.py, and a node reads it with
scripts/install/store.sh."""
