# Trainscope server image: build on Debian bookworm, run on a slim bookworm.
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libmicrohttpd-dev libsqlite3-dev libpq-dev zlib1g-dev \
      libjansson-dev libcurl4-openssl-dev nodejs npm ca-certificates && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY common common
COPY server server
COPY collector collector
COPY schemas schemas
COPY scripts/web-build.sh scripts/web-build.sh
COPY web/package.json web/package-lock.json web/build.mjs web/
COPY web/src web/src
RUN cmake -S . -B build -DBUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j"$(nproc)" && strip build/trainscope-server

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libmicrohttpd12 libsqlite3-0 libpq5 zlib1g libjansson4 \
 && rm -rf /var/lib/apt/lists/* && useradd --system --home /data trainscope \
 && mkdir -p /data && chown trainscope /data
COPY --from=build /src/build/trainscope-server /usr/local/bin/trainscope-server
USER trainscope
VOLUME /data
EXPOSE 8470
ENTRYPOINT ["trainscope-server", "--listen", "0.0.0.0:8470", "--db", "/data/trainscope.db"]
