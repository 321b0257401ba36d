#!/bin/sh
# with-ca.sh COMMAND [ARGS...]: runs COMMAND in an image build, trusting the CA bundle passed as
# the build secret "ca" (compose: secrets.ca) when there is one: machines that reach the package
# registries through a TLS-inspecting proxy need its CA. pip, curl and Go read the bundle
# through the environment; Maven gets a temporary Java trust store with the certificates of the
# bundle that the image's own bundle lacks (each costs a keytool run, so only for mvn). Nothing
# of the bundle stays in a layer: the secret is a mount of this RUN only, and the trust store
# is deleted before the RUN ends.
set -eu
bundle=/run/secrets/ca
if [ ! -s "$bundle" ]; then
    exec "$@"
fi
export PIP_CERT="$bundle" SSL_CERT_FILE="$bundle" CURL_CA_BUNDLE="$bundle" \
    REQUESTS_CA_BUNDLE="$bundle"
if [ "$1" = mvn ] && [ -f /etc/ssl/certs/java/cacerts ]; then
    store="$(mktemp -d)"
    trap 'rm -rf "$store"' EXIT
    cp /etc/ssl/certs/java/cacerts "$store/cacerts"
    # The certificates of the bundle that the image's (Mozilla's) bundle does not hold.
    python3 - "$bundle" /etc/ssl/certs/ca-certificates.crt "$store" <<'PY'
import sys
END = "-----END CERTIFICATE-----"
def certs(path):
    try:
        text = open(path).read()
    except FileNotFoundError:
        return {}
    found = (part[part.index("-----BEGIN"):] + END for part in text.split(END) if "BEGIN" in part)
    return {"".join(pem.split()): pem + "\n" for pem in found}
known = certs(sys.argv[2])
extra = [pem for key, pem in certs(sys.argv[1]).items() if key not in known]
for i, pem in enumerate(extra):
    open(f"{sys.argv[3]}/extra-{i}.pem", "w").write(pem)
PY
    for pem in "$store"/extra-*.pem; do
        [ -e "$pem" ] || continue
        keytool -importcert -noprompt -storepass changeit -keystore "$store/cacerts" \
            -alias "$(basename "$pem" .pem)" -file "$pem" >/dev/null 2>&1
    done
    export MAVEN_OPTS="${MAVEN_OPTS:-} -Djavax.net.ssl.trustStore=$store/cacerts -Djavax.net.ssl.trustStorePassword=changeit"
    "$@"
    exit
fi
exec "$@"
