print("pusher-local")
