#!/usr/bin/env bash
# Run HERE (the development machine), after building: fills .devlibs/ (git-
# ignored) with what tests/gpu/run.sh needs on the GPU host, which has no
# libuv, libyaml, cJSON, yajl or libmicrohttpd (its Nettle and GnuTLS are newer
# than Debian's and are used as they are: carrying Debian's Nettle would
# shadow the one its GnuTLS needs): the built gprofd and gprofctl, and those
# libraries unpacked from Debian's packages. Then carry .devlibs in the
# device run: tests/gpu/run.sh builds nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .devlibs && mkdir -p .devlibs/debs .devlibs/bin .devlibs/lib
(cd .devlibs/debs && apt-get download libuv1 libyaml-0-2 libcjson1 libmicrohttpd12 libyajl2)
for f in .devlibs/debs/*.deb; do dpkg -x "$f" .devlibs/root; done
cp -a .devlibs/root/usr/lib/x86_64-linux-gnu/*.so* .devlibs/lib/
# OpenSSL 3 (gprofd's and gprofctl's TLS) apart: run.sh uses it only where
# the host has no libssl.so.3, so Python's own is never shadowed
rm -rf .devlibs/root .devlibs/debs && mkdir -p .devlibs/debs .devlibs/lib-ssl
(cd .devlibs/debs && apt-get download libssl3)
dpkg -x .devlibs/debs/libssl3_*.deb .devlibs/root
cp -a .devlibs/root/usr/lib/x86_64-linux-gnu/lib{ssl,crypto}.so* .devlibs/lib-ssl/
cp build/daemon/gprofd build/ctl/gprofctl .devlibs/bin/
# bench/footprint.py --cclient (8 getStatus clients as threads of one process)
cp build/bench/bench-getstatus .devlibs/bin/
cp build/agent/libgprof_agent.so .devlibs/lib/
# a build tree's layout too (ctl/gprofctl beside agent/, python/ two levels
# up: the checkout's), so the device proves `gprofctl launch` from one
mkdir -p .devlibs/ctl .devlibs/agent
cp build/ctl/gprofctl .devlibs/ctl/
cp build/agent/libgprof_agent.so .devlibs/agent/
# the agent's CUDA C workload, for Hopper (sm_90) and newer through PTX
/usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90 -o .devlibs/bin/workload tests/gpu/workload.cu
# the stress test's CUDA C loop, linked with the agent (gprof_step)
/usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90 -Iagent -Lbuild/agent -lgprof_agent -Xcompiler -rdynamic \
	-o .devlibs/bin/stress tests/gpu/stress.cu
# the CUDA C loop of bench/after_burst.py (linked with the agent: gprof_step)
/usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90 -Iagent -Lbuild/agent -lgprof_agent -Xcompiler -rdynamic \
	-o .devlibs/bin/after_burst bench/after_burst.cu
# what each way of recording with CUPTI costs (bench/cupti_cost.cu; the
# toolkit's libcupti, where the GPU host has it too)
/usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90 -lcupti -Xlinker -rpath,/usr/local/cuda/lib64 \
	-o .devlibs/bin/cupti_cost bench/cupti_cost.cu
# the CUPTI spy (bench/cupti_spy.c): who calls CUPTI, for kineto_beside.sh
cc -shared -fPIC -O2 -o .devlibs/lib/cupti_spy.so bench/cupti_spy.c -ldl
# an earlier agent to compare with (OLD_AGENT=path/to/libgprof_agent.so)
if [ -n "${OLD_AGENT:-}" ]; then
	mkdir -p .devlibs/lib-old && cp "$OLD_AGENT" .devlibs/lib-old/
fi
rm -rf .devlibs/root .devlibs/debs
echo "prepared .devlibs ($(du -sh .devlibs | cut -f1))"
