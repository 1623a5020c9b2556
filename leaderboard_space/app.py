"""The ReXrank leaderboard Space. The store is $REXRANK_STORE (on the Hub Space: hf://ORG,
with an HF_TOKEN secret that can write ORG/requests and ORG/results); without it, a local
store seeded with the published ReXrank results. All logic is in rexrank.leaderboard."""
from rexrank.input_limits import MAX_FILE_BYTES
from rexrank.leaderboard.app import build_app
from rexrank.leaderboard.source import LeaderboardSource, open_leaderboard_store

store, note = open_leaderboard_store()
if note:
    print(note)
demo = build_app(LeaderboardSource.from_store(store))

if __name__ == "__main__":
    demo.launch(max_file_size=MAX_FILE_BYTES)  # larger uploads are refused before they reach the Submit tab
