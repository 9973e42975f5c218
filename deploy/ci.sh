#!/usr/bin/env bash
# The deploy/check module's tests (its own go.mod: the container, compose,
# seccomp and Kubernetes libraries stay out of fanoutd's): the image built
# without a Docker engine and its binary and configuration checked, the
# Dockerfile, the compose file, the seccomp profile, and the Kubernetes
# manifests validated by kubeconform against the Kubernetes API's OpenAPI
# document (k8s.io/kubernetes's, from the Go module proxy). .ci/run calls
# this; run it from anywhere. A few minutes: TestImage builds fanoutd with -trimpath, a build of its own.
set -euo pipefail
cd "$(dirname "$0")/check"
go vet ./...
go test -count=1 -timeout 20m ./...
