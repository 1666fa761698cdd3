#!/bin/sh
# Pin the controller image of both kustomizations (deploy/ and
# deploy/namespaced/) to the digest the registry reports for a pushed tag:
#   docker push ghcr.io/drasat/drasat:v0.1.0     # prints "digest: sha256:..."
#   crane digest ghcr.io/drasat/drasat:v0.1.0    # or read it back
#   deploy/pin-image.sh v0.1.0 sha256:...
# then commit the two files; go test ./deploy/ checks they agree.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 TAG sha256:DIGEST" >&2
	exit 2
fi
tag=$1 digest=$2
case $digest in
sha256:*) ;;
*) echo "$0: digest must be sha256:<64 hex digits>, got $digest" >&2; exit 2 ;;
esac
hex=${digest#sha256:}
if [ ${#hex} -ne 64 ] || [ -n "$(printf %s "$hex" | tr -d 0-9a-f)" ]; then
	echo "$0: digest must be sha256:<64 hex digits>, got $digest" >&2
	exit 2
fi
dir=$(dirname "$0")
for k in "$dir/kustomization.yaml" "$dir/namespaced/kustomization.yaml"; do
	sed -i -e "s|^  newTag: .*|  newTag: $tag|" -e "s|^  digest: .*|  digest: $digest|" "$k"
	echo "pinned $k to $tag@$digest"
done
