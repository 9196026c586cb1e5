# axon: multi-stage build, release binary, distroless non-root runtime.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY vendor ./vendor
COPY src ./src
# The workspace's member crates (crates/xds declares a bench: cargo needs its file to read
# the manifest).
COPY crates ./crates
COPY config ./config
RUN cargo build --release --locked -p axon --bin axon

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/axon /usr/local/bin/axon
COPY config/actor-limits.toml /etc/axon/actor-limits.toml
COPY config/demo /etc/axon/config
USER nonroot:nonroot
# 15010: ADS (plaintext gRPC), 15014: /metrics, /healthz, /ready
EXPOSE 15010 15012 15014 15017
ENTRYPOINT ["/usr/local/bin/axon"]
# The demo mesh by default; config/kubernetes/30-deployment.yaml passes its own args
# (`serve --kubernetes --limits /etc/axon/actor-limits.toml`).
CMD ["serve", "--config-dir", "/etc/axon/config", "--limits", "/etc/axon/actor-limits.toml"]
