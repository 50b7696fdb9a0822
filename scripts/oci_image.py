"""Writes the static node agent as an OCI image layout (https://github.com/opencontainers/
image-spec/blob/main/image-layout.md), without a container daemon: one layer holding
/colosched-agent and /etc/colosched/agent.toml (the DaemonSet's config, replaced there by its
ConfigMap), a config whose entrypoint is the agent, a manifest and an index naming the tag.

    .venv/bin/python scripts/oci_image.py [--binary PATH] [--config PATH] [--tag NAME:TAG] --out DIR

Push it with `skopeo copy oci:DIR:TAG docker://REGISTRY/colosched-agent:TAG` or
`crane push DIR REGISTRY/colosched-agent:TAG`. The layer is reproducible: fixed mtimes, owners
and order, so the same binary gives the same digests.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "target/x86_64-unknown-linux-gnu/release/colosched-agent"
ENTRYPOINT = ["/colosched-agent"]
CMD = ["run", "--config", "/etc/colosched/agent.toml"]


def blob(out: Path, data: bytes, media_type: str) -> dict:
    """Stores `data` under blobs/sha256/ and returns its descriptor."""
    digest = hashlib.sha256(data).hexdigest()
    path = out / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed tar of `files` (path -> (content, mode)), root-owned, mtime 0."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(Path(p).parent) for p in files} - {"."})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write(binary: Path, config: bytes, tag: str, out: Path) -> dict:
    """The OCI layout in `out`, with `config` as /etc/colosched/agent.toml; returns its manifest."""
    tar = layer(
        {
            "colosched-agent": (binary.read_bytes(), 0o755),
            "etc/colosched/agent.toml": (config, 0o644),
        }
    )
    gz = gzip.compress(tar, mtime=0)
    layer_desc = blob(out, gz, "application/vnd.oci.image.layer.v1.tar+gzip")
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ENTRYPOINT, "Cmd": CMD, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(tar).hexdigest()}"]},
        "history": [{"created_by": "scripts/oci_image.py: the static colosched-agent"}],
    }
    config_desc = blob(
        out, json.dumps(image_config, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json"
    )
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }
    manifest_desc = blob(out, json.dumps(manifest, sort_keys=True).encode(), manifest["mediaType"])
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": tag.split(":", 1)[-1]}
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_desc],
    }
    (out / "index.json").write_text(json.dumps(index, sort_keys=True))
    (out / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    return manifest


def agent_toml_from_deploy() -> bytes:
    """The DaemonSet's config, from its ConfigMap (the image's default, so that it runs as is)."""
    text = (ROOT / "deploy/kubernetes/colosched-agent.yaml").read_text()
    body = text.split("  agent.toml: |\n", 1)[1].split("\n---", 1)[0]
    return ("\n".join(line[4:] for line in body.splitlines()) + "\n").encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--binary", type=Path, default=AGENT, help="the static agent (default: make agent-static's)"
    )
    ap.add_argument(
        "--config", type=Path, help="agent.toml in the image (default: the DaemonSet's ConfigMap)"
    )
    ap.add_argument("--tag", default="colosched-agent:0.1.0")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty directory for the OCI layout")
    args = ap.parse_args()
    if not args.binary.is_file():
        ap.error(f"--binary {args.binary}: no such file (`make agent-static` builds it)")
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"--out {args.out}: not empty")
    config = args.config.read_bytes() if args.config else agent_toml_from_deploy()
    manifest = write(args.binary, config, args.tag, args.out)
    size = sum(d["size"] for d in manifest["layers"]) / 2**20
    print(f"wrote {args.out} ({args.tag}, one layer of {size:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
