#!/usr/bin/env bash
# Makes a certificate authority and one certificate per node (plus one for kbrl-shell), for a
# cluster whose manifest turns TLS on with `ca_file`.
#
#   tools/make-certs.sh OUTDIR NODE [NODE...]          names given on the command line
#   tools/make-certs.sh OUTDIR --manifest cluster.toml names read from the manifest's [[node]]s
#
# Writes OUTDIR/ca.pem, ca.key, NODE.pem, NODE.key for each node, shell.pem and shell.key.
# An existing CA in OUTDIR is reused, so certificates for new nodes join the same cluster.
# Keys are EC P-256, certificates valid for 825 days; keys are readable by the owner only.
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
out=$1; shift
names=()
if [ "$1" = "--manifest" ]; then
  [ $# -eq 2 ] || usage
  manifest=$2
  [ -r "$manifest" ] || { echo "make-certs: cannot read manifest $manifest" >&2; exit 1; }
  # Node names: the `name = "..."` line of each [[node]] table (kbrl's manifests keep one per line).
  mapfile -t names < <(awk '
    /^[[:space:]]*\[\[node\]\]/ { in_node = 1; next }
    /^[[:space:]]*\[/           { in_node = 0 }
    in_node && /^[[:space:]]*name[[:space:]]*=/ {
      sub(/^[^=]*=[[:space:]]*"/, ""); sub(/".*$/, ""); print }' "$manifest")
  [ ${#names[@]} -gt 0 ] || { echo "make-certs: no [[node]] names found in $manifest" >&2; exit 1; }
else
  names=("$@")
fi
for n in "${names[@]}"; do
  [[ "$n" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "make-certs: bad node name '$n'" >&2; exit 1; }
done

command -v openssl >/dev/null || { echo "make-certs: openssl is not installed" >&2; exit 1; }
mkdir -p "$out"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -f "$out/ca.pem" ] || [ ! -f "$out/ca.key" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$out/ca.key"
  openssl req -x509 -new -key "$out/ca.key" -sha256 -days 825 -subj "/CN=kbrl cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$out/ca.pem" 2>/dev/null
  echo "make-certs: new CA $out/ca.pem"
fi

for n in "${names[@]}" shell; do
  openssl ecparam -name prime256v1 -genkey -noout -out "$out/$n.key"
  openssl req -new -key "$out/$n.key" -subj "/CN=$n" -out "$work/$n.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\n' "$n" > "$work/$n.ext"
  openssl x509 -req -in "$work/$n.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -CAcreateserial -CAserial "$work/ca.srl" -days 825 -sha256 -extfile "$work/$n.ext" \
    -out "$out/$n.pem" 2>/dev/null
  echo "make-certs: $out/$n.pem"
done
chmod 644 "$out"/*.pem
