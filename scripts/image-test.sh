#!/usr/bin/env bash
# image-test.sh [IMAGE]: check the container image `make image` built
# (default localhost/historyd:latest). What `make image-test` runs.
#
# 1. Its configuration (podman image inspect): entrypoint /historyd, command
#    serve, a numeric non-root user, no HEALTHCHECK, no environment beyond
#    PATH, the gRPC and metrics ports, and the OCI labels, whose revision must
#    be this checkout's HEAD (IMAGE_REVISION overrides) and whose licenses
#    label must be present exactly when the repository has a license file.
# 2. Its contents (podman save, then the layer tars): exactly /historyd and
#    /etc/ssl/certs/ca-certificates.crt, root-owned and not writable by the
#    image's user; the binary static (no ELF interpreter), built with
#    CGO_ENABLED=0 and -trimpath (go version -m).
# 3. It runs: `podman run --read-only --cap-drop ALL` of `version` and of a
#    demo file served with /readyz answering 200. Where the machine refuses to
#    start containers at all (a sandbox whose crun may not set rlimits), the
#    extracted binary is run instead, as the image's user, and the script
#    says so; any other podman run failure fails the test.
# The binary's own `version` must report the labels' version and revision.
#
# Needs podman, python3, curl; it is not part of `make test`, which must not
# require podman (see docs/deploy.md).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

PODMAN=${PODMAN:-podman}
IMAGE_REF=${1:-localhost/historyd:latest}
WANT_REVISION=${IMAGE_REVISION:-$(git rev-parse HEAD)}

for tool in "$PODMAN" python3 curl go; do
  if ! command -v "$tool" >/dev/null; then
    echo "image-test.sh: $tool not found" >&2
    exit 1
  fi
done

fail() {
  echo "image-test.sh: FAIL: $*" >&2
  exit 1
}

work=$(mktemp -d)
pids=()
containers=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for c in "${containers[@]}"; do "$PODMAN" rm -f "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

"$PODMAN" image inspect "$IMAGE_REF" >"$work/inspect.json" ||
  fail "no image $IMAGE_REF; run make image first"
"$PODMAN" save --format docker-archive -o "$work/image.tar" "$IMAGE_REF" >/dev/null
license=
for f in LICENSE LICENSE.md LICENSE.txt COPYING; do
  [[ -e $f ]] && license=$f
done

# Configuration, labels and contents; extracts the binary to $work/historyd
# and prints the labels' version and revision.
read -r label_version label_revision < <(
  python3 - "$work" "$WANT_REVISION" "$license" <<'PY'
import json, re, sys, tarfile

work, want_rev, license_file = sys.argv[1], sys.argv[2], sys.argv[3]
errors = []
def check(ok, msg):
    if not ok:
        errors.append(msg)

img = json.load(open(f"{work}/inspect.json"))[0]
cfg = img.get("Config", {})
check(cfg.get("Entrypoint") == ["/historyd"], f"entrypoint {cfg.get('Entrypoint')}, want ['/historyd']")
check(cfg.get("Cmd") == ["serve"], f"cmd {cfg.get('Cmd')}, want ['serve']")
user = cfg.get("User", "")
m = re.fullmatch(r"(\d+):(\d+)", user)
check(m is not None and m.group(1) != "0" and m.group(2) != "0", f"user {user!r}, want numeric non-root uid:gid")
check(not any(d.get(k) for d in (img, cfg) for k in ("Healthcheck", "HealthCheck")), "image has a HEALTHCHECK; probes belong to the orchestrator")
env = [e for e in cfg.get("Env") or [] if not e.startswith("PATH=")]
check(env == [], f"environment beyond PATH baked into the image: {env}")
ports = sorted((cfg.get("ExposedPorts") or {}).keys())
check(ports == ["50051/tcp", "9090/tcp"], f"exposed ports {ports}, want 50051/tcp and 9090/tcp")

labels = cfg.get("Labels") or {}
oci = "org.opencontainers.image."
version = labels.get(oci + "version", "")
revision = labels.get(oci + "revision", "")
check(labels.get(oci + "title") == "historyd", f"title label {labels.get(oci + 'title')!r}")
check(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*", version) is not None and version != "unknown",
      f"version label {version!r}")
check(revision == want_rev, f"revision label {revision!r}, want {want_rev} (rebuild with make image, or set IMAGE_REVISION)")
created = labels.get(oci + "created", "")
check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", created) is not None, f"created label {created!r}, want RFC 3339 UTC")
check(labels.get(oci + "source", "").startswith("https://"), f"source label {labels.get(oci + 'source')!r}")
if license_file:
    check(labels.get(oci + "licenses"), f"{license_file} exists but the image has no licenses label (set IMAGE_LICENSES)")
else:
    check(oci + "licenses" not in labels, "licenses label set but the repository has no license file")

# Contents: every layer's entries, later layers over earlier ones.
outer = tarfile.open(f"{work}/image.tar")
manifest = json.load(outer.extractfile("manifest.json"))
files = {}
for layer in manifest[0]["Layers"]:
    with tarfile.open(fileobj=outer.extractfile(layer), mode="r:*") as t:
        for ti in t.getmembers():
            name = ti.name.lstrip("./").rstrip("/")
            if not name:
                continue
            files[name] = ti
            if name == "historyd" and ti.isfile():
                with open(f"{work}/historyd", "wb") as out:
                    out.write(t.extractfile(ti).read())
regular = sorted(n for n, ti in files.items() if not ti.isdir())
check(regular == ["etc/ssl/certs/ca-certificates.crt", "historyd"],
      f"image files {regular}, want only historyd and etc/ssl/certs/ca-certificates.crt")
uid = int(m.group(1)) if m else -1
for name, ti in files.items():
    check(ti.uid == 0, f"/{name} owned by uid {ti.uid}, want root")
    check(ti.mode & 0o022 == 0, f"/{name} mode {ti.mode:o} is group- or world-writable")
    check(ti.uid != uid, f"/{name} is owned by the image's user")
bin_ti = files.get("historyd")
check(bin_ti is not None and bin_ti.isfile() and bin_ti.mode & 0o111 == 0o111, "/historyd missing or not executable")
ca = files.get("etc/ssl/certs/ca-certificates.crt")
check(ca is not None and ca.size > 1000, "CA bundle missing or empty")

# Static: no PT_INTERP program header (64-bit little-endian ELF).
try:
    data = open(f"{work}/historyd", "rb").read()
    check(data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "/historyd is not a 64-bit little-endian ELF")
    phoff = int.from_bytes(data[32:40], "little")
    phentsize = int.from_bytes(data[54:56], "little")
    phnum = int.from_bytes(data[56:58], "little")
    types = [int.from_bytes(data[phoff + i * phentsize:phoff + i * phentsize + 4], "little") for i in range(phnum)]
    check(3 not in types, "/historyd has an ELF interpreter: it is dynamically linked")
except OSError as e:
    errors.append(f"binary not extracted: {e}")

if errors:
    for e in errors:
        print("image-test.sh: FAIL: " + e, file=sys.stderr)
    sys.exit(1)
print(version, revision)
PY
) || fail "image configuration or contents (see above)"
[[ -n ${label_revision:-} ]] || fail "image configuration or contents (see above)"
echo "image-test.sh: $IMAGE_REF: configuration, labels ($label_version, $label_revision) and contents ok" >&2

buildinfo=$(go version -m "$work/historyd")
# (-trimpath leaves -ldflags out of the build information; the binary's own
# version output, below, shows what -X set.)
for want in 'build	CGO_ENABLED=0' 'build	-trimpath=true' 'path	github.com/historyd/historyd/cmd/historyd'; do
  grep -qF -- "$want" <<<"$buildinfo" || fail "go version -m of /historyd lacks \"$want\":"$'\n'"$buildinfo"
done

# Running it: in a container if this machine allows, else the extracted
# binary as the image's user.
mode=container
if ! out=$("$PODMAN" run --rm --read-only --cap-drop ALL --security-opt no-new-privileges "$IMAGE_REF" version 2>&1); then
  if grep -qE 'setrlimit|OCI permission denied' <<<"$out"; then
    mode=binary
    echo "image-test.sh: this machine refuses to start containers ($(tail -1 <<<"$out")); running the image's binary directly, as its user" >&2
  else
    fail "podman run $IMAGE_REF version: $out"
  fi
fi
user=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["Config"]["User"])' "$work/inspect.json")
as_user=(setpriv --reuid "${user%%:*}" --regid "${user##*:}" --clear-groups)
if [[ $mode == binary ]]; then
  chmod 0755 "$work" "$work/historyd"
  out=$("${as_user[@]}" "$work/historyd" version)
fi
grep -qx "version  $label_version" <<<"$out" || fail "historyd version says"$'\n'"$out"$'\n'"want version $label_version"
grep -qx "commit   $label_revision" <<<"$out" || fail "historyd version says"$'\n'"$out"$'\n'"want commit $label_revision"
echo "image-test.sh: historyd version ($mode) reports $label_version, $label_revision" >&2

# Serve the demo file and wait for /readyz.
data="$work/data"
mkdir -p "$data"
chmod 0777 "$data"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if [[ $mode == container ]]; then
  "$PODMAN" run --rm --read-only --cap-drop ALL --security-opt no-new-privileges \
    -v "$data:/data" "$IMAGE_REF" demo --out /data/demo.db >/dev/null
  cid=$("$PODMAN" run -d --read-only --cap-drop ALL --security-opt no-new-privileges \
    -v "$data:/data:ro" -p "127.0.0.1:$port:9090" "$IMAGE_REF" \
    serve --dsn /data/demo.db --listen :50051 --metrics-listen :9090)
  containers+=("$cid")
else
  "${as_user[@]}" "$work/historyd" demo --out "$data/demo.db" >/dev/null
  "${as_user[@]}" "$work/historyd" serve --dsn "$data/demo.db" --listen 127.0.0.1:0 \
    --metrics-listen "127.0.0.1:$port" 2>"$work/serve.log" &
  pids+=($!)
fi
for _ in $(seq 50); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    metrics=$(curl -fsS "http://127.0.0.1:$port/metrics")
    grep -q '^historyd_state_cache_bytes ' <<<"$metrics" || fail "/metrics lacks historyd_state_cache_bytes"
    echo "image-test.sh: serve ($mode): /readyz 200, /metrics exports historyd_* ; all checks passed" >&2
    exit 0
  fi
  sleep 0.2
done
[[ $mode == binary ]] && cat "$work/serve.log" >&2
fail "serve ($mode): /readyz did not answer 200 within 10s"
