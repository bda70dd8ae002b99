#!/usr/bin/env sh
# Validates manifests (default: every *.yaml here) against the Kubernetes API
# schemas that kubernetes-validate bundles (no cluster, no network), strictly
# (unknown fields are errors), for the oldest Kubernetes they are written for.
# The validator is $KUBERNETES_VALIDATE, else `kubernetes-validate` on PATH
# (`pip install kubernetes-validate==1.37.0`, as .ci/run does).
set -eu
KUBERNETES_VERSION=1.30.0
if [ "$#" -eq 0 ]; then
  set -- "$(dirname "$0")"/*.yaml
fi
exec "${KUBERNETES_VALIDATE:-kubernetes-validate}" --strict --quiet \
  --kubernetes-version "$KUBERNETES_VERSION" "$@"
