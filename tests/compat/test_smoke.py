"""The shortest path a user takes: create a store, upload a file, search it — through the official SDK."""


def test_upload_and_search(client):
    store = client.vector_stores.create(name="smoke")
    attached = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("notes.txt", b"HNSW graphs make approximate nearest neighbour search fast."))
    assert attached.status == "completed" and attached.id.startswith("file-")
    page = client.vector_stores.search(store.id, query="nearest neighbour graphs")
    assert page.search_query == ["nearest neighbour graphs"]
    assert page.data[0].file_id == attached.id and 0 <= page.data[0].score <= 1
    assert client.vector_stores.retrieve(store.id).file_counts.completed == 1
