from rexrank.metric_space import build_metric_demo

demo = build_metric_demo("srr_bert")

if __name__ == "__main__":
    demo.launch()
