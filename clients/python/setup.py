"""The shoal Python client.

The protocol's classes are generated from protocol/shoal.proto when the
package is built, with protoc (Debian: protobuf-compiler), so that they
always match the nodes built from the same tree. SHOAL_PROTO names another
shoal.proto.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.environ.get("SHOAL_PROTO") or os.path.join(HERE, "..", "..", "protocol", "shoal.proto")


class BuildWithProtocol(build_py):
    """Generates shoal/shoal_pb2.py from shoal.proto before the usual build."""

    def run(self):
        protoc = shutil.which("protoc")
        if not protoc:
            raise SystemExit("shoal: protoc is needed to build the client (apt-get install protobuf-compiler)")
        if not os.path.exists(PROTO):
            raise SystemExit("shoal: %s is missing (set SHOAL_PROTO to a shoal.proto)" % PROTO)
        out = os.path.join(HERE, "shoal")
        subprocess.check_call([protoc, "--python_out=" + out, "--proto_path=" + os.path.dirname(os.path.abspath(PROTO)),
                               os.path.abspath(PROTO)])
        super().run()


setup(
    name="shoal",
    version="0.1.0",
    description="Client of shoal, a peer mesh that runs stateful workloads and moves them live",
    packages=["shoal"],
    python_requires=">=3.9",
    # From Debian: python3-zmq and python3-protobuf.
    install_requires=["pyzmq", "protobuf"],
    cmdclass={"build_py": BuildWithProtocol},
)
