import CSodium
import PusherProtocol
import WSClient
import AsyncHTTPClient
