# The gateway image. It also carries redis-server, so that docker-compose.yml runs both services
# from images built on this machine when no registry is reachable.
#
# Build with scripts/build-gateway-image: it stages build/gateway/ (wheels of the project and its
# pinned dependencies, pip itself, and the Debian packages of redis-server) so that this build
# needs no network. BASE_IMAGE is python:3.11-slim where a registry is reachable; otherwise the
# Debian image that scripts/bootstrap builds.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
COPY build/gateway/ /tmp/build/
RUN set -eu; \
    for deb in /tmp/build/debs/*.deb; do [ -e "$deb" ] && dpkg-deb -x "$deb" /; done; \
    [ -e /usr/bin/redis-check-rdb ] && ln -sf redis-check-rdb /usr/bin/redis-server; \
    set -- /tmp/build/wheels/pip-*.whl; \
    python3 "$1/pip" install --quiet --no-index --no-compile \
        --find-links /tmp/build/wheels --target /opt/envscaler/site \
        -c /tmp/build/requirements.lock envscaler envscaler-client; \
    rm -rf /tmp/build
COPY generated_envs/ /opt/envscaler/generated_envs/
ENV PYTHONPATH=/opt/envscaler/site \
    PATH=/opt/envscaler/site/bin:/usr/local/bin:/usr/bin:/bin \
    ENVSCALER_CATALOGUE=/opt/envscaler/generated_envs \
    PYTHONUNBUFFERED=1
EXPOSE 8000
ENTRYPOINT ["python3", "-m", "envscaler.cli"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
