from rexrank.metric_space import build_metric_demo

# The Space reads its LLM endpoint from REXRANK_LLM_BASE_URL / REXRANK_LLM_MODEL / REXRANK_LLM_API_KEY secrets.
demo = build_metric_demo("crimson")

if __name__ == "__main__":
    demo.launch()
