# axon: multi-stage build, release binary, distroless non-root runtime.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY vendor ./vendor
COPY src ./src
# Cargo.toml declares the benches: cargo needs their files to read the manifest.
COPY benches ./benches
COPY config ./config
RUN cargo build --release --locked --bin axon

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/axon /usr/local/bin/axon
COPY config/actor-limits.toml /etc/axon/actor-limits.toml
COPY config/demo /etc/axon/config
USER nonroot:nonroot
# 15010: ADS (plaintext gRPC), 15014: /metrics, /healthz, /ready
EXPOSE 15010 15012 15014
ENTRYPOINT ["/usr/local/bin/axon"]
# The demo mesh by default; config/kubernetes/30-deployment.yaml passes its own args
# (`serve --kubernetes --limits /etc/axon/actor-limits.toml`).
CMD ["serve", "--config-dir", "/etc/axon/config", "--limits", "/etc/axon/actor-limits.toml"]
