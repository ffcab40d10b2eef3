# syntax=docker/dockerfile:1
# sheetq in a container (docs/self-hosting.md). Build:
#   docker build --build-arg VERSION=$(git describe --tags --always) -t sheetq .
# Run (it listens on all interfaces inside the container, so it needs a token):
#   docker run -d -p 8080:8080 -v sheetq-data:/data -e SHEETQ_TOKEN=... sheetq

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# No cgo: a static binary that runs on distroless/static (modernc.org/sqlite is pure Go).
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sheetq . \
    && mkdir -p /out/data

# distroless static: no shell, no package manager; "nonroot" is uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sheetq /usr/local/bin/sheetq
COPY --from=build --chown=65532:65532 /out/data /data
ENV SHEETQ_DATA=/data \
    SHEETQ_ADDR=0.0.0.0:8080
USER 65532:65532
VOLUME /data
EXPOSE 8080
# sheetq refuses to listen on 0.0.0.0 without SHEETQ_TOKEN (or [[tokens]] in
# /data/sheetq.toml); SIGTERM lets running exports finish (docker stop -t 45).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sheetq"]
CMD ["serve"]
