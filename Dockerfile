# tsorch serve in a container: an OpenAI-compatible endpoint on port 8000.
#   docker build -t tsorch .
#   docker run -p 8000:8000 -v $HOME/.cache/huggingface:/root/.cache/huggingface \
#     -e TSORCH_API_KEY=KEY tsorch --model Qwen/Qwen3-0.6B
# Readiness and liveness: GET /health (503 while draining after SIGTERM).
FROM node:20-bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends g++ make python3 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json binding.gyp tsconfig.json ./
COPY src ./src
COPY bin ./bin
COPY models ./models
RUN npm ci && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
COPY --from=build /app /app
ENV NODE_ENV=production
EXPOSE 8000
# SIGTERM (docker stop, a Kubernetes rollout) drains running requests, then exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/tsorch.js", "serve", "--host", "0.0.0.0", "--port", "8000"]
