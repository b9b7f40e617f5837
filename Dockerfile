# Trainscope image: build on Debian bookworm, run on a slim bookworm. It holds the server
# (the entrypoint) and the collector (docker run --entrypoint trainscope-collect ...), with
# their man pages; not libtrainscope-cupti.so, which needs the CUDA toolkit's CUPTI to build
# (collect run: build it on the training nodes). The .dockerignore keeps the context small.
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libmicrohttpd-dev libsqlite3-dev libpq-dev zlib1g-dev libdeflate-dev libzstd-dev \
      libjansson-dev libcurl4-openssl-dev nodejs npm ca-certificates && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY common common
COPY server server
COPY collector collector
COPY man man
COPY schemas schemas
COPY scripts/web-build.sh scripts/web-build.sh
COPY web/package.json web/package-lock.json web/build.mjs web/
COPY web/src web/src
RUN cmake -S . -B build -DBUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j"$(nproc)" \
 && cmake --install build --prefix /opt/trainscope --strip

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libmicrohttpd12 libsqlite3-0 libpq5 zlib1g libdeflate0 libzstd1 libjansson4 libcurl4 \
 && rm -rf /var/lib/apt/lists/* && useradd --system --home /data trainscope \
 && mkdir -p /data && chown trainscope /data
COPY --from=build /opt/trainscope/ /usr/local/
USER trainscope
VOLUME /data
EXPOSE 8470
# the image has no curl: the server asks its own /healthz (trainscope-server --help)
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
  CMD ["trainscope-server", "--listen", "127.0.0.1:8470", "--healthcheck"]
ENTRYPOINT ["trainscope-server", "--listen", "0.0.0.0:8470", "--db", "/data/trainscope.db"]
