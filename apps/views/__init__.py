"""One Streamlit page script per view; ``apps/streamlit_app.py`` runs them with ``st.navigation``."""
